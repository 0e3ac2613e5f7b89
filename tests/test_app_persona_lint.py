"""Persona lint in the Personas view, in a real browser: the warnings count column and the editor's warnings."""
from __future__ import annotations

import pytest
from helpers import fill, fill_night_nurse, new_form, wait_for
from playwright.sync_api import expect

from simulator.personas import store as persona_store

pytestmark = [pytest.mark.browser, pytest.mark.model, pytest.mark.process]  # the lint embeds with MiniLM


@pytest.fixture
def browser_page(browser_page):
    """The lab opens on Live rollout; these tests begin on the Personas view."""
    browser_page.get_by_role("tab", name="Personas").click()
    return browser_page
LINT_WAIT = 120_000  # ms: the first lint loads the sentence model on CPU


def test_warnings_column_and_editor_warnings(browser_page, lab_server, grid_rows):
    page = browser_page
    expect(page.locator("#persona-table")).to_contain_text("warnings")
    expect(page.locator("#persona-count")).to_contain_text("32 of 32", timeout=LINT_WAIT)
    # the counts follow the listing in a second event; the built-ins lint clean
    wait_for(lambda: {row[-1] for row in grid_rows(page, "persona-table")} == {"0"}, timeout=LINT_WAIT / 1000)

    new_form(page)
    fill_night_nurse(page, "ui-asks-a-lot", "Why me? Why tonight? Why always me?")
    # Checked before saving: the unsaved form is linted.
    page.click("#persona-lint")
    warnings = page.locator("#persona-warnings")
    expect(warnings).to_contain_text("1 warning(s)", timeout=LINT_WAIT)
    expect(warnings).to_contain_text("first_line: asks 3 questions; at most 2")
    assert persona_store.get_profile(lab_server.store, "ui-asks-a-lot") is None

    page.click("#persona-save")
    expect(page.locator("#persona-status")).to_contain_text("Saved ui-asks-a-lot", timeout=LINT_WAIT)
    expect(warnings).to_contain_text("first_line: asks 3 questions")
    page.locator("#persona-search textarea").fill("ui-asks-a-lot")
    page.locator("#persona-search textarea").press("Enter")
    expect(page.locator("#persona-count")).to_contain_text("1 of 33", timeout=LINT_WAIT)
    wait_for(lambda: grid_rows(page, "persona-table")[0][-1] == "1", timeout=LINT_WAIT / 1000)

    # Fixed in the form and saved: the editor and the list say so.
    fill(page, "persona-first-line", "Long night. Don't ask.")
    page.click("#persona-save")
    expect(warnings).to_contain_text("no warnings", timeout=LINT_WAIT)
    expect(page.locator("#persona-table [role=gridcell]").last).to_have_text("0")
