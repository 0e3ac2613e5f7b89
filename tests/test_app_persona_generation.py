"""The Personas view's Generate panel: its form and review table without a browser, then in a real browser
against the scripted server: generate 6 personas, watch the progress complete, accept them all and find
them in the persona list."""
from __future__ import annotations

import pytest

from app.services import persona_generation_form
from simulator.personas import generation_store
from simulator.personas import store as persona_store
from testkit.scripted_server import start_server


@pytest.fixture
def browser_page(browser_page):
    """The lab opens on Live rollout; these tests begin on the Personas view."""
    browser_page.get_by_role("tab", name="Personas").click()
    return browser_page

FORM = {"count": 4.0, "needs": ["just_listen"], "personalities": [], "languages": ["en"], "topics": "work\n\nmoney",
        "seed": 2.0, "base_url": "http://127.0.0.1:8000/v1", "model": "m", "threshold": 0.9}


def test_the_form_becomes_a_spec_and_settings_or_names_each_bad_field():
    spec, settings, errs = persona_generation_form.read_form(FORM)
    assert errs == {} and spec.count == 4 and [v for v, _ in spec.dims["topics"]] == ["work", "money"]
    assert [v for v, _ in spec.dims["needs"]] == ["just_listen"] and len(spec.dims["personalities"]) == 3
    assert settings == {"base_url": FORM["base_url"], "model": "m", "threshold": 0.9}
    spec, _, errs = persona_generation_form.read_form({**FORM, "count": 0, "languages": ["en", "fr"],
                                                       "base_url": "localhost", "model": " ", "threshold": 1.5})
    assert spec is None and set(errs) == {"count", "languages", "base_url", "model", "threshold"}
    assert errs["languages"].startswith("languages[1]: unknown value 'fr'")
    shown = persona_generation_form.errors_markdown(errs)
    assert "Not started" in shown and "threshold" in shown


@pytest.mark.model
def test_progress_and_review_rows_of_a_stored_generation(store):
    persona_store.seed_builtin(store)
    spec, settings, _ = persona_generation_form.read_form({**FORM, "topics": "gen-mode:invalid debt"})
    with start_server() as server:
        gid = generation_store.run_generation(store, spec, generation_store.make_generator(server.base_url, "scripted"))
    g = generation_store.get_generation(store, gid)
    html = persona_generation_form.progress_html(g)
    assert "<progress max='4' value='4'" in html and "4 of 4 (finished): 4 invalid" in html
    assert "dedupe threshold 0.90" in html
    rows = persona_generation_form.candidate_rows(generation_store.list_candidates(store, gid))
    assert len(rows) == 4 and all(r[5] == "invalid" and r[3] == "just_listen" and r[7] == "" for r in rows)
    detail = persona_generation_form.candidate_markdown(generation_store.get_candidate(store, rows[0][0]))
    assert "hidden\\_need: is required" in detail and detail.startswith(f"**Candidate {rows[0][0]}**")


@pytest.mark.model
def test_a_generations_accepted_personas_become_a_named_set(store):
    from simulator.personas import sets as persona_sets

    persona_store.seed_builtin(store)
    spec, _, _ = persona_generation_form.read_form(FORM)
    set_from_generation = persona_generation_form.set_from_generation
    assert set_from_generation(store, "gen-set", None) == "**No set made.** generation: generate first."
    with start_server() as server:
        gid = generation_store.run_generation(store, spec, generation_store.make_generator(server.base_url, "scripted"))
    assert set_from_generation(store, "gen-set", gid).startswith("**No set made.** generation: no stored")
    taken = generation_store.accept_all_valid(store, gid)
    message = set_from_generation(store, "gen-set", gid)
    assert message.startswith(f"Created set **gen\\-set** from generation {gid}: {len(taken)} accepted persona(s)")
    assert {p.id for p in persona_sets.set_profiles(store, "gen-set")} == {p.id for p in taken}
    assert set_from_generation(store, "gen-set", gid).startswith("**No set made.** name: a set named")


@pytest.mark.slow
@pytest.mark.process
def test_generate_review_and_accept_in_the_browser(lab_server, browser_page, grid_rows, screenshot):
    from playwright.sync_api import expect

    page = browser_page
    before = persona_store.count_profiles(lab_server.store)
    with start_server() as server:
        page.get_by_text("Generate personas with an LLM").click()
        page.locator("#gen-count input").fill("6")
        page.locator("#gen-base-url textarea").fill(server.base_url)
        page.locator("#gen-model textarea").fill("scripted")
        expect(page.locator("#gen-threshold input")).to_have_value("0.9")
        page.click("#gen-start")
        expect(page.locator("#gen-progress-text")).to_contain_text("6 of 6 (finished): 6 pending")
        expect(page.locator("#gen-table [role=gridcell]").first).to_be_visible()
        rows = grid_rows(page, "gen-table")
        assert len(rows) == 6 and {r[5] for r in rows} == {"pending"}
        page.locator("#gen-table [role=gridcell]").first.click()
        expect(page.locator("#gen-candidate")).to_contain_text("Nearest persona")
        screenshot(page, "persona-generation.png")
        page.click("#gen-edit")  # into the persona form, edited there, then accepted from the panel
        expect(page.locator("#persona-name textarea")).to_have_value(rows[0][2])
        page.locator("#persona-first-line textarea").fill("Rough week. Can I tell you about it?")
        page.click("#gen-accept-edited")
        expect(page.locator("#gen-status")).to_contain_text("Accepted the edited form as")
        page.click("#gen-accept-all")
        expect(page.locator("#gen-status")).to_contain_text("Accepted 5 persona(s).")
        expect(page.locator("#gen-progress-text")).to_contain_text("6 accepted")
    expect(page.locator("#persona-count")).to_contain_text(f"{before + 6} of {before + 6} profiles")
    for name in sorted(r[2] for r in rows)[:2]:  # the list is a virtual grid: search brings a row into view
        page.locator("#persona-search textarea").fill(name)
        page.locator("#persona-search textarea").press("Enter")
        expect(page.locator("#persona-count")).to_contain_text(f"1 of {before + 6} profiles")
        expect(page.locator("#persona-table")).to_contain_text(name)
    page.locator("#persona-search textarea").fill("")
    stored = [p for p in persona_store.list_profiles(lab_server.store) if p.source == "generated"]
    assert len(stored) == 6 and all("generation_id" in p.extra for p in stored)
    assert [p.first_line for p in stored if p.name == rows[0][2]] == ["Rough week. Can I tell you about it?"]
