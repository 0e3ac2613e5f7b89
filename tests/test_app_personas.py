"""Personas view in a real browser: create through the form, field errors, user text shown as text, import."""
from __future__ import annotations

import json

import pytest
from helpers import choose, fill, fill_night_nurse, new_form
from playwright.sync_api import expect

from simulator.personas import store as persona_store

pytestmark = [pytest.mark.browser, pytest.mark.process]


@pytest.fixture
def browser_page(browser_page):
    """The lab opens on Live rollout; these tests begin on the Personas view."""
    browser_page.get_by_role("tab", name="Personas").click()
    return browser_page


def test_create_persona_through_the_form(browser_page, lab_server, screenshot):
    page = browser_page
    new_form(page)
    fill_night_nurse(page, "ui-night-nurse", "Long night. Don't ask.")
    page.click("#persona-save")
    expect(page.locator("#persona-status")).to_contain_text("Saved ui-night-nurse")
    stored = persona_store.get_profile(lab_server.store, "ui-night-nurse")
    assert stored is not None
    assert (stored.need_category, stored.personality, stored.traits) == ("just_listen", "avoidant",
                                                                          ["tired", "proud", "guarded"])
    assert stored.first_line == "Don't ask." or stored.first_line == "Long night. Don't ask."
    # The id is locked while editing; the list shows the new profile when searched.
    expect(page.locator("#persona-id textarea")).to_be_disabled()
    screenshot(page, "personas.png", full_page=False)
    page.locator("#persona-search textarea").fill("night-nurse")
    page.locator("#persona-search textarea").press("Enter")
    expect(page.locator("#persona-table")).to_contain_text("Mara, night nurse")
    expect(page.locator("#persona-count")).to_contain_text("1 of")


def test_bad_persona_shows_the_field_error_and_is_not_stored(browser_page, lab_server):
    page = browser_page
    new_form(page)
    fill(page, "persona-id", "ui-incomplete")
    fill(page, "persona-name", "Incomplete")
    fill(page, "persona-background", "Something happened.")
    fill(page, "persona-traits", "a, b, c, d")
    page.click("#persona-save")
    expect(page.locator("#persona-status")).to_contain_text("Not saved")
    expect(page.locator("#err-persona")).to_contain_text("is required")
    expect(page.locator("#err-hidden_need")).to_contain_text("is required")
    expect(page.locator("#err-need_category")).to_contain_text("unknown category")
    expect(page.locator("#err-traits")).to_contain_text("at most 3")
    expect(page.locator("#err-background")).to_be_hidden()
    assert persona_store.get_profile(lab_server.store, "ui-incomplete") is None
    # An id that is taken is reported under the id field.
    fill(page, "persona-id", "ui-night-nurse")
    fill(page, "persona-persona", "Someone.")
    fill(page, "persona-hidden-need", "Something.")
    fill(page, "persona-traits", "a")
    choose(page, "persona-need-category", "Deep empathy rather than simple comfort (deep_empathy)")
    choose(page, "persona-personality", "negative")
    page.click("#persona-save")
    expect(page.locator("#err-id")).to_contain_text("already exists")
    expect(page.locator("#err-persona")).to_be_hidden()
    assert persona_store.get_profile(lab_server.store, "ui-night-nurse").name == "Mara, night nurse"


def test_user_text_is_shown_as_text_and_runs_nothing(browser_page, lab_server):
    page = browser_page
    script, img = "<script>alert(1)</script>", "<img src=x onerror=alert(1)>"
    new_form(page)
    fill(page, "persona-id", "ui-xss")
    fill(page, "persona-name", f"{script} {img}")
    choose(page, "persona-need-category", "Sincere praise of concrete actions (sincere_praise)")
    choose(page, "persona-personality", "passive")
    fill(page, "persona-persona", img)
    fill(page, "persona-background", script)
    fill(page, "persona-hidden-need", img)
    page.click("#persona-save")
    expect(page.locator("#persona-status")).to_contain_text("Saved ui-xss")
    expect(page.locator("#persona-status")).to_contain_text(script)
    page.reload()  # the lab opens on Live rollout again
    page.get_by_role("tab", name="Personas").click()
    page.locator("#persona-search textarea").fill("ui-xss")
    page.locator("#persona-search textarea").press("Enter")
    expect(page.locator("#persona-table")).to_contain_text(img)
    page.locator("#persona-table [role=gridcell]", has_text="ui-xss").first.click()
    expect(page.locator("#persona-form-title")).to_contain_text("ui-xss")
    expect(page.locator("#persona-persona textarea")).to_have_value(img)
    page.wait_for_timeout(500)
    assert page.dialogs == []
    assert page.locator("img[src='x']").count() == 0
    assert persona_store.get_profile(lab_server.store, "ui-xss").name == f"{script} {img}"


def test_import_reports_every_bad_line_and_keep_valid(browser_page, lab_server, tmp_path):
    page = browser_page
    good = {"id": "ui-imported", "name": "Imported", "persona": "p", "background": "b", "hidden_need": "h",
            "need_category": "useful_advice", "personality": "negative", "traits": ["x"]}
    bad = dict(good, id="ui-imported-bad", need_category="telepathy")
    path = tmp_path / "profiles.jsonl"
    path.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(bad) + "\n", encoding="utf-8")
    page.get_by_text("Import / export").click()
    page.locator("#persona-import-file input[type=file]").set_input_files(str(path))
    page.click("#persona-import")
    report = page.locator("#persona-import-report")
    expect(report).to_contain_text("0 stored")
    expect(report).to_contain_text("line 2")
    expect(report).to_contain_text("line 3: need_category")
    assert persona_store.get_profile(lab_server.store, "ui-imported") is None
    page.get_by_label("Keep the valid lines when some are bad").check()
    page.click("#persona-import")
    expect(report).to_contain_text("1 stored")
    assert persona_store.get_profile(lab_server.store, "ui-imported").need_category == "useful_advice"
    assert persona_store.get_profile(lab_server.store, "ui-imported-bad") is None


def test_the_form_refuses_an_id_and_a_name_the_import_refuses(browser_page, lab_server, tmp_path):
    """The id and length rules are the import's (Profile.errors): shown under the field when it is left, and Save
    stores nothing; the same line in a file is refused by the import."""
    from simulator.personas.io import import_profiles

    page = browser_page
    new_form(page)
    fill(page, "persona-id", "bad id with spaces!")
    page.locator("#persona-id textarea").blur()
    expect(page.locator("#err-id")).to_contain_text("may hold only letters, digits")
    fill_night_nurse(page, "bad id with spaces!", "Long night.")
    fill(page, "persona-name", "N" * 5000)
    page.locator("#persona-name textarea").blur()
    expect(page.locator("#err-name")).to_contain_text("a name is at most 120")
    page.click("#persona-save")
    expect(page.locator("#persona-status")).to_contain_text("Not saved")
    expect(page.locator("#err-id")).to_contain_text("no spaces")
    assert persona_store.get_profile(lab_server.store, "bad id with spaces!") is None
    expect(page.locator("#persona-id textarea")).to_be_editable()  # not locked: nothing was saved
    fill(page, "persona-id", "good-id")
    page.locator("#persona-id textarea").blur()
    expect(page.locator("#err-id")).to_be_hidden()
    line = {"id": "bad id with spaces!", "name": "Sam", "persona": "p", "background": "b", "hidden_need": "h",
            "need_category": "deep_empathy", "personality": "passive"}
    report = import_profiles(json.dumps(line).encode())
    assert report.profiles == [] and [e.field for e in report.errors] == ["id"]
