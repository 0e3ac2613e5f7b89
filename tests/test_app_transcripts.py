"""Transcripts view: collections from imports and from the store's own dialogues, the rendered turns, and a
real browser reading the published GPT-4.1 transcript (curve drawn, 68.2)."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.plots import emotion_figure, tier_bands
from app.render import dialogue_html, md
from app.views import transcripts as transcripts_view
from simulator.evaluation import transcripts
from storage.dialogues import add_turn, finish_dialogue, start_dialogue


def test_emotion_figure_has_tier_bands_and_one_line_per_series():
    fig = emotion_figure([("a", [40, 50, None, 70]), ("b", [40, 30])])
    assert [t.name for t in fig.data] == ["a", "b"]
    assert list(fig.data[0].y) == [40.0, 50.0, None, 70.0]
    assert [(n, lo) for n, lo, _ in tier_bands()] == [("S", 100.0), ("A", 70.0), ("B", 40.0), ("C", 10.0), ("F", 0.0)]
    assert sorted(a.text for a in fig.layout.annotations) == ["A", "B", "C", "F", "S"]


def test_user_text_is_escaped_in_turns_and_markdown():
    evil = "<img src=x onerror=alert(1)> <script>alert(1)</script>"
    html = dialogue_html([{"role": "user", "index": 0, "text": evil, "emotion": 40, "inner": {"analysis": evil}},
                          {"role": "assistant", "index": 1, "text": "ok", "think_text": evil}])
    assert "<img" not in html and "<script" not in html
    assert html.count("&lt;img src=x onerror=alert(1)&gt;") == 3
    assert "<" not in md(evil).replace("\\", "")
    # quotes are left as they are: an entity like &#x27; would get its '#' escaped and show on the page
    assert md("named 'x' \"y\"") == "named 'x' \"y\""


@pytest.mark.model
def test_collections_cover_imports_and_store_dialogues(store, tmp_path):
    path = tmp_path / "mini_result.jsonl"
    path.write_text('{"id": "r1", "emo_point": 100, "history": [{"role": "user", "content": "hi", "emotion-point": 40},'
                    ' {"role": "assistant", "content": "hello"}, {"role": "user", "content": "thanks",'
                    ' "emotion-point": 100, "planning": {"change": 10}}]}\n'
                    '{"id": "r2", "emo_point": 5, "history": []}\n', encoding="utf-8")
    rep = transcripts.import_file(store, path)
    assert len(rep.dialogue_ids) == 2
    live = start_dialogue(store, persona_id="p", source="rollout", policy_ref="default")
    add_turn(store, live, 0, "user", "hey", emotion=40.0)
    finish_dialogue(store, live, "finished", 60.0, outcome="max_turns")
    keys = [k for _, k in transcripts_view.collections(store)]
    assert keys == ["import:mini_result.jsonl", "source:rollout"]
    assert [i for _, i in transcripts_view.dialogues(store, "import:mini_result.jsonl")] == rep.dialogue_ids
    assert [i for _, i in transcripts_view.dialogues(store, "source:rollout")] == [live]
    assert transcripts_view.summary_md(store, "import:mini_result.jsonl").startswith("**Score 52.5**")
    assert "success 1 · failure 1 · n 2" in transcripts_view.summary_md(store, "import:mini_result.jsonl")
    # dialogues of two rule sets in one collection: a score each, never one pooled header
    hard = start_dialogue(store, persona_id="p", source="rollout", policy_ref="default",
                          simulator_fingerprint={"backend": "offline", "rules": {"name": "rlver-hard"}},
                          fingerprint_hash="hard")
    finish_dialogue(store, hard, "finished", -55.0, outcome="failure")
    mixed = transcripts_view.summary_md(store, "source:rollout")
    assert mixed.startswith("This collection holds dialogues of 2 simulators or rule sets")
    assert "**Score 60.0**" in mixed and "**Score -55.0**" in mixed and "rules rlver\\-hard" in mixed
    assert "Score 2.5" not in mixed
    meta, fig, html = transcripts_view.dialogue_view(store, rep.dialogue_ids[0])
    assert list(fig.data[0].y) == [40.0, 100.0]
    assert "data-emotion='100'" in html and "inner thoughts" in html
    assert "does not exist" in transcripts_view.dialogue_view(store, 999_999)[0]


@pytest.mark.process
@pytest.mark.browser
def test_import_gpt41_transcript_and_read_it(browser_page, lab_server, shared_data, screenshot):
    page = browser_page
    page.get_by_role("tab", name="Transcripts").click()
    page.locator("#transcript-file input[type=file]").set_input_files(str(shared_data / "sage" / "gpt-4.1_result.jsonl"))
    page.click("#transcript-import")
    expect(page.locator("#transcript-import-report")).to_contain_text("100 dialogue(s) imported", timeout=180_000)
    summary = page.locator("#transcript-summary")
    expect(summary).to_contain_text("Score 68.2")
    expect(summary).to_contain_text("success 35 · failure 13 · n 100")
    page.locator("#transcript-dialogue input").click()
    page.get_by_role("option").nth(1).click()
    turns = page.locator("#transcript-turns")
    expect(turns.locator(".turn-user").first).to_be_visible()
    n_user = turns.locator(".turn-user").count()
    assert n_user >= 2
    assert turns.locator("details.inner-thoughts").count() >= n_user - 1
    expect(page.locator("#transcript-plot .js-plotly-plot")).to_be_visible()
    points = page.locator("#transcript-plot .scatterlayer .trace .points path")
    expect(points).to_have_count(n_user)
    turns.locator("details.inner-thoughts summary").nth(1).click()
    expect(turns.locator("details.inner-thoughts").nth(1).locator("dl.inner")).to_be_visible()
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "transcripts.png", full_page=False)


@pytest.mark.model
@pytest.mark.process
@pytest.mark.browser
def test_dialogue_opens_from_the_url(browser_page, lab_server):
    d = start_dialogue(lab_server.store, persona_id="linked", source="rollout", policy_ref="default")
    add_turn(lab_server.store, d, 0, "user", "opened by link", emotion=40.0)
    finish_dialogue(lab_server.store, d, "finished", 40.0, outcome="max_turns")
    page = browser_page
    page.goto(f"{lab_server.url}?dialogue={d}")
    expect(page.get_by_role("tab", name="Transcripts")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#transcript-meta")).to_contain_text(f"#{d}")
    expect(page.locator("#transcript-turns")).to_contain_text("opened by link")


MINI = ('{"id": "f1", "emo_point": 50, "history": [{"role": "user", "content": "hi", "emotion-point": 40},'
        ' {"role": "assistant", "content": "hello"}, {"role": "user", "content": "go on", "emotion-point": 45,'
        ' "planning": {"change": 5}}, {"role": "assistant", "content": "sure"}, {"role": "user", "content": "ok",'
        ' "emotion-point": 50}]}\n'
        '{"id": "f2", "emo_point": 30, "history": [{"role": "user", "content": "hey", "emotion-point": 40},'
        ' {"role": "assistant", "content": "whatever"}, {"role": "user", "content": "hm", "emotion-point": 30,'
        ' "planning": {"change": -10}}]}\n')


def test_fidelity_of_a_collection(store, tmp_path):
    path = tmp_path / "fid_result.jsonl"
    path.write_text(MINI, encoding="utf-8")
    transcripts.import_file(store, path)
    summary, fig = transcripts_view.fidelity_view(store, "import:fid_result.jsonl")
    # +5 (recorded change), +5 (no change recorded: 50 - 45), -10
    assert summary.startswith("**Fidelity** · 3 judged changes in 2 dialogue(s) · distance (TV) ")
    lab = fig.data[0]
    assert dict(zip(lab.x, lab.y)) == pytest.approx({"-10": 1 / 3, "-5": 0, "0": 0, "+2": 0, "+5": 2 / 3, "+10": 0})
    assert fig.data[1].name == "published DeepSeek-V3" and lab.name == "fid_result.jsonl (n 3)"
    assert transcripts_view.fidelity_view(store, "") == ("", None)
    assert transcripts_view.fidelity_view(store, "source:rollout")[0] == "**Fidelity** · no judged user turns"


@pytest.mark.process
@pytest.mark.browser
def test_fidelity_chart_of_a_collection_in_browser(browser_page, lab_server, tmp_path):
    for name, text in (("fidelity-mini", MINI), ("fidelity-one", MINI.splitlines(keepends=True)[1])):
        (tmp_path / f"{name}_result.jsonl").write_text(text, encoding="utf-8")
        transcripts.import_file(lab_server.store, tmp_path / f"{name}_result.jsonl")
    page = browser_page
    page.get_by_role("tab", name="Personas").click()
    page.get_by_role("tab", name="Transcripts").click()  # showing the view refreshes its collections
    page.locator("#transcript-collection input").click()
    page.get_by_role("option", name="fidelity-mini_result.jsonl (2 imported)").click()
    page.locator("#transcript-fidelity-box").get_by_text("Fidelity: emotion changes", exact=False).click()
    expect(page.locator("#transcript-fidelity-summary")).to_contain_text("3 judged changes in 2 dialogue(s)")
    expect(page.locator("#transcript-fidelity .js-plotly-plot")).to_be_visible()
    expect(page.locator("#transcript-fidelity .barlayer .trace")).to_have_count(2)
    # while open, the chart follows the selected collection
    page.locator("#transcript-collection input").click()
    page.get_by_role("option", name="fidelity-one_result.jsonl (1 imported)").click()
    expect(page.locator("#transcript-fidelity-summary")).to_contain_text("1 judged changes in 1 dialogue(s)")


def test_the_empty_collection_line_only_for_an_empty_collection(store):
    assert transcripts_view.summary_md(store, "source:human") == "No dialogues in this collection yet."
    running = start_dialogue(store, persona_id="p", source="human", policy_ref="default")
    add_turn(store, running, 0, "user", "hey", emotion=40.0)
    text = transcripts_view.summary_md(store, "source:human")
    assert text.startswith("None of these dialogues is scored") and "No dialogues" not in text
