"""Rate the simulator in a real browser: two raters rate a set blind, the simulator's change is revealed only
after each answer, bad input and a second rating of the same turn are refused with a message, ratings import
(all or nothing) and the agreement report shows with its plots."""
from __future__ import annotations

import json

import pytest
from helpers import make_dialogue
from playwright.sync_api import expect

from storage.ratings import list_ratings


def _rate(page, value: str) -> None:
    page.locator("#rate-change input").fill(value)
    page.click("#rate-submit")


@pytest.mark.browser
def test_rate_view_blind_reveal_refusals_import_and_report(browser_page, lab_server, tmp_path):
    page, store = browser_page, lab_server.store
    did = make_dialogue(store, persona_id="en-32-zoe-kim", fp="fp-rate", changes=[7.0, -9.0, 3.0])
    page.get_by_role("tab", name="Rate the simulator").click()
    page.locator("#rate-rater textarea").fill("ana")
    page.locator("#rate-set textarea").fill("eval:999")
    page.click("#rate-load")
    expect(page.locator("#rate-progress")).to_contain_text("names no stored dialogues")

    page.locator("#rate-set textarea").fill(f"dialogue:{did}")
    page.click("#rate-load")
    expect(page.locator("#rate-progress")).to_contain_text("3 turn(s) left")
    expect(page.locator("#rate-item")).to_contain_text("reply 1")
    item = page.locator("#rate-item").inner_text()
    assert "+7" not in item and "answer 1" not in item and "felt" not in item  # blind: no reaction shown
    expect(page.locator("#rate-reveal")).not_to_contain_text("simulator")

    _rate(page, "250")
    expect(page.locator("#rate-reveal")).to_contain_text("change: must lie between -100 and 100")
    assert list_ratings(store) == []
    _rate(page, "5")
    expect(page.locator("#rate-reveal")).to_contain_text("the simulator's change was +7")
    page.click("#rate-submit")  # again, on the turn just rated
    expect(page.locator("#rate-reveal")).to_contain_text(f"you already rated dialogue {did}, turn 2")
    page.click("#rate-next")
    expect(page.locator("#rate-item")).to_contain_text("reply 2")
    _rate(page, "-4")
    expect(page.locator("#rate-reveal")).to_contain_text("the simulator's change was -9")
    assert [(r["rater"], r["turn_index"], r["delta"]) for r in list_ratings(store)] == [("ana", 2, 5.0), ("ana", 4, -4.0)]

    # reloading the set offers only the turn ana has not rated: no turn is rated twice
    page.click("#rate-load")
    expect(page.locator("#rate-progress")).to_contain_text("1 turn(s) left")
    _rate(page, "2")
    expect(page.locator("#rate-reveal")).to_contain_text("the simulator's change was +3")

    # a second rater's file: one line rates a turn twice, so nothing is imported
    lines = [{"dialogue_id": did, "turn_index": t, "rater": "ben", "delta": v} for t, v in ((2, 6), (4, -8), (6, 1))]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(x) for x in lines + [lines[0]]))
    page.locator("#rate-upload input[type=file]").set_input_files(str(bad))
    page.click("#rate-import")
    expect(page.locator("#rate-import-status")).to_contain_text("Nothing imported")
    expect(page.locator("#rate-import-status")).to_contain_text("line 4")
    assert {r["rater"] for r in list_ratings(store)} == {"ana"}
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(json.dumps(x) for x in lines))
    page.locator("#rate-upload input[type=file]").set_input_files(str(good))
    page.click("#rate-import")
    expect(page.locator("#rate-import-status")).to_contain_text("Imported 3 rating(s)")

    page.click("#rate-report")
    expect(page.locator("#rate-report-table")).to_contain_text("6 rating(s) of 3 turn(s) by 2 rater(s)")
    expect(page.locator("#rate-report-table")).to_contain_text("fingerprint fp-rate")
    expect(page.locator("#rate-scatter .scatterlayer .trace")).to_have_count(2)
    expect(page.locator("#rate-bars .barlayer .trace")).to_have_count(2)
    assert page.dialogs == []


@pytest.mark.browser
def test_an_untouched_submit_is_refused_under_the_field_and_stores_nothing(browser_page, lab_server):
    """The change box opens empty and is emptied again by Load: Submit without a value is refused, never read
    as 0 (the agreement figures are made of these ratings)."""
    page, store = browser_page, lab_server.store
    page.reload()
    did = make_dialogue(store, persona_id="en-32-zoe-kim", fp="fp-untouched", changes=[4.0])
    page.get_by_role("tab", name="Rate the simulator").click()
    page.locator("#rate-rater textarea").fill("cleo")
    page.locator("#rate-set textarea").fill(f"dialogue:{did}")
    page.click("#rate-load")
    expect(page.locator("#rate-progress")).to_contain_text("1 turn(s) left")
    expect(page.locator("#rate-change input")).to_have_value("")
    page.click("#rate-submit")
    expect(page.locator("#err-rate-change")).to_contain_text("change: set your guess")
    assert [r for r in list_ratings(store) if r["rater"] == "cleo"] == []
    _rate(page, "0")  # a 0 the rater typed is a rating
    expect(page.locator("#rate-reveal")).to_contain_text("the simulator's change was +4")
    expect(page.locator("#err-rate-change")).to_have_text("")
    assert [r["delta"] for r in list_ratings(store) if r["rater"] == "cleo"] == [0.0]


def test_a_report_of_too_few_ratings_is_one_line():
    from app.views.people.rate import report_md
    from simulator.evaluation.agreement import agreement_report

    rows = [{"dialogue_id": 1, "turn_index": t, "rater": "a", "delta": d, "simulator_delta": s,
             "fingerprint_hash": "f", "need_category": "n", "personality": "p"} for t, d, s in ((2, 3.0, 5.0),
                                                                                              (4, -2.0, 1.0))]
    text = report_md(agreement_report(rows, n_boot=20))
    assert "\n" not in text and text.startswith("2 rating(s) of 2 turn(s) by 1 rater(s): too few")
