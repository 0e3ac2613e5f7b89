"""The Personas view's Sets panel and the persona editor's preview, in a real browser against the lab with a
real SQLite store: a set from the filters, its 80/20 split, the coverage heatmap, set:NAME offered by the
other views; a preview dialogue of an unsaved persona with a tiny policy and the offline simulator."""
from __future__ import annotations

import pytest
from helpers import choose, fill, fill_night_nurse, new_form
from playwright.sync_api import expect
from sqlalchemy import func, select

from app.views import persona_preview, persona_sets_panel
from simulator.personas import sets as persona_sets
from simulator.personas import store as persona_store
from storage import Dialogue, read_scope


def test_panel_functions_report_by_field(store):
    persona_store.seed_builtin(store)
    assert persona_sets_panel.create_from_view(store, "", "", "", "", "", "").startswith("**Not created.** name:")
    msg = persona_sets_panel.create_from_view(store, "negatives", "", "", "negative", "en", "")
    assert msg.startswith("Created set **negatives**")
    assert persona_sets_panel.split_from_view(store, None, 0.8, 0) == "**Not split.** set: pick a set first."
    assert persona_sets_panel.split_from_view(store, "negatives", 1.2, 0).startswith("**Not split.** fraction:")
    assert persona_sets_panel.split_from_view(store, "negatives", 0.8, 1).startswith("Split **negatives**")
    rows = persona_sets_panel.set_rows(store)
    assert [r[0] for r in rows] == ["negatives", "negatives-heldout", "negatives-train"]
    assert rows[0][1] == rows[1][1] + rows[2][1] and rows[2][3] == "split"
    from app.services import training

    assert persona_sets_panel.delete_from_view(store, None) == "**Not deleted.** set: pick a set first."
    assert persona_sets_panel.delete_from_view(store, "nope") == "**Not deleted.** set: no stored set named nope."
    persona_sets_panel.create_from_view(store, "doomed", "", "", "avoidant", "", "")
    n = persona_store.count_profiles(store)
    assert persona_sets_panel.delete_from_view(store, "doomed").startswith("Deleted set **doomed**")
    assert "doomed" not in persona_sets.set_names(store)
    assert persona_store.count_profiles(store) == n  # its personas stay
    assert training.persona_set_choices(store) == ["builtin", "builtin:train", "builtin:heldout", "builtin:adversarial", "set:negatives",
                                                   "set:negatives-heldout", "set:negatives-train"]


@pytest.mark.model
def test_preview_refuses_an_invalid_form_naming_the_fields(store):
    values = {"id": "", "name": "X", "language": "en", "difficulty": "standard", "need_category": None,
              "personality": "avoidant", "traits": "", "persona": "", "background": "b", "hidden_need": "h",
              "explicit_goal": "", "first_line": ""}
    status, _, html = list(persona_preview.preview_dialogue(store, "k", None, values, "default", "offline", 2))[-1]
    assert status.startswith("**Not previewed.**") and "id: is required" in status and "persona: is required" in status
    assert "need\\_category: unknown category" in status and "data-dialogues='0'" in html


@pytest.mark.process
@pytest.mark.browser
def test_create_a_set_from_filters_split_it_and_see_its_coverage(browser_page, lab_server):
    page, store = browser_page, lab_server.store
    page.get_by_role("tab", name="Personas").click()
    choose(page, "persona-filter-personality", "avoidant")
    expect(page.locator("#persona-count")).to_contain_text(
        f"{len(persona_store.list_profiles(store, personality='avoidant'))} of")
    page.locator("#sets-name textarea").fill("ui-avoidant")
    page.click("#sets-create")
    expect(page.locator("#sets-status")).to_contain_text("Created set ui-avoidant")
    members = persona_sets.set_profiles(store, "ui-avoidant")
    assert members and all(p.personality == "avoidant" for p in members)
    expect(page.locator("#sets-table")).to_contain_text("ui-avoidant")
    # the new set is picked: its coverage heatmap and empty cells (no avoidant set covers other types)
    expect(page.locator("#sets-coverage .heatmaplayer .hm")).to_have_count(1)
    expect(page.locator("#sets-empty")).to_contain_text("empty cell(s)")
    expect(page.locator("#sets-empty")).to_contain_text("dialectical_analysis × negative")
    page.locator("#sets-fraction input").fill("0.8")
    page.locator("#sets-seed input").fill("4")
    page.click("#sets-split")
    expect(page.locator("#sets-status")).to_contain_text("Split ui-avoidant into ui-avoidant-train")
    expect(page.locator("#sets-table")).to_contain_text("ui-avoidant-heldout")
    train = persona_sets.set_summary(store, "ui-avoidant-train")
    heldout = persona_sets.set_summary(store, "ui-avoidant-heldout")
    assert train.size + heldout.size == len(members) and train.params["seed"] == 4
    # the other views offer the stored sets
    page.get_by_role("tab", name="Benchmark").click()
    page.locator("#bench-profiles input").click()
    expect(page.get_by_role("option", name="set:ui-avoidant-heldout")).to_be_visible()
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Live rollout").click()
    page.locator("#live-personas input").click()
    expect(page.get_by_role("option", name="set ui-avoidant-train", exact=False)).to_be_visible()
    page.keyboard.press("Escape")
    page.get_by_role("tab", name="Personas").click()
    choose(page, "persona-filter-personality", "any")
    assert page.dialogs == []


@pytest.mark.process
@pytest.mark.browser
def test_preview_an_unsaved_persona_from_the_editor(browser_page, lab_server, tiny_model_dir):
    page, store = browser_page, lab_server.store
    page.get_by_role("tab", name="Personas").click()
    new_form(page)
    fill_night_nurse(page, "ui-preview-nurse", "Long night. Don't ask.")
    page.get_by_text("Preview dialogue (the form as it is, not saved)").click()
    page.locator("#preview-policy textarea").fill(str(tiny_model_dir))
    page.locator("#preview-turns input[type=number]").fill("2")
    page.locator("#preview-turns input[type=number]").press("Enter")
    page.click("#preview-run")
    expect(page.locator("#preview-status")).to_contain_text("Done:", timeout=180_000)
    expect(page.locator("#preview-status")).to_contain_text("nothing stored")
    chat = page.locator("#preview-chat")
    expect(chat.locator(".turn-assistant").first).to_be_attached()
    expect(chat.locator("dl.inner").first).to_be_attached()  # the user's inner thoughts
    expect(chat).to_contain_text("Long night. Don't ask.")
    expect(page.locator("#preview-plot .scatterlayer .trace")).to_have_count(1)
    assert persona_store.get_profile(store, "ui-preview-nurse") is None  # not saved
    with read_scope(store) as s:
        assert s.scalar(select(func.count(Dialogue.id)).where(Dialogue.persona_id == "ui-preview-nurse")) == 0
    # a form with a problem is not previewed; the field is named
    fill(page, "persona-hidden-need", "")
    page.click("#preview-run")
    expect(page.locator("#preview-status")).to_contain_text("Not previewed")
    expect(page.locator("#preview-status")).to_contain_text("hidden_need: is required")
    assert page.dialogs == []


def test_an_empty_coverage_chart_says_what_fills_it():
    fig = persona_sets_panel.coverage_figure(None)
    assert fig.data == () and fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False
    assert "Pick a persona set" in fig.layout.annotations[0].text
