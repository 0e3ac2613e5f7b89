"""Live rollout view: the streaming handler against a real tiny model, the offline simulator and a real store;
Stop (twice); bad input; and the view in a real browser (turns streamed, curve drawn, stop)."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from sqlalchemy import select

from app.views import live_rollout
from simulator.personas import store as persona_store
from storage import Dialogue, read_scope


def _args(personas, policy, group=2, max_turns=6, mode="direct"):
    return dict(persona_ids=personas, policy=policy, policy_url="", simulator="offline", simulator_url="",
                rules="standard", mode=mode, group=group, max_turns=max_turns, max_new_tokens=16,
                temperature=1.0, seed=0)


@pytest.fixture
def seeded(store):
    persona_store.seed_builtin(store)
    return store, [p.id for p in persona_store.list_profiles(store)][:1]


@pytest.mark.model
def test_stream_shows_turns_and_stop_twice_cancels(seeded, tiny_model_dir):
    store, personas = seeded
    assert live_rollout.stop_rollout("s1") == "Nothing is running."
    gen = live_rollout.start_rollout(store, "s1", **_args(personas, str(tiny_model_dir), group=2, max_turns=10))
    outputs, stops = [], []
    for out in gen:
        outputs.append(out)
        if not stops and out[2].count("turn-assistant") >= 2:
            stops = [live_rollout.stop_rollout("s1"), live_rollout.stop_rollout("s1")]
    assert stops == ["Stopping…", "Already stopping…"]
    status, fig, html, finished = outputs[-1]
    assert status.startswith("Stopped:") or status.startswith("Done:")
    assert "data-dialogues='2'" in html
    assert len(fig.data) == 2 and all(len(t.y) >= 1 for t in fig.data)
    assert len(finished["choices"]) == 2
    with read_scope(store) as s:
        rows = s.execute(select(Dialogue.status, Dialogue.outcome, Dialogue.error)).all()
    assert len(rows) == 2 and all(st in ("finished", "failed", "cancelled") for st, _, _ in rows)
    assert any(o == "cancelled" and e for _, o, e in rows) or status.startswith("Done:")
    assert live_rollout.stop_rollout("s1") == "Nothing is running."


@pytest.mark.model
def test_bad_input_is_reported_and_nothing_runs(seeded, tmp_path):
    store, personas = seeded
    out = list(live_rollout.start_rollout(store, "s2", **_args(["no-such-persona"], "default")))
    status = out[-1][0].replace("\\", "")  # Markdown escapes removed
    assert "Cannot start" in status and "unknown persona id(s): no-such-persona" in status
    out = list(live_rollout.start_rollout(store, "s2", **_args(personas, str(tmp_path / "missing-model"))))
    assert "Cannot load the policy" in out[-1][0]
    out = list(live_rollout.start_rollout(store, "s2", **_args([], "default")))
    assert "Pick at least one persona" in out[-1][0]
    with read_scope(store) as s:
        assert s.scalars(select(Dialogue)).all() == []


def test_partial_replies_give_tokens_so_far_and_the_time_left_for_the_turn():
    from app.views.live_partial import PartialReplies, partial_html, seconds_left, writing_words

    now = [100.0]
    partial = PartialReplies(cap=50, clock=lambda: now[0])
    partial.listener(["a", "b", ""], [[1], [], [9]])  # a row without a key or a token is not shown
    assert partial.progress("a") == ([1], None) and partial.progress("b") is None  # no pace from one token
    now[0] = 104.0
    partial.listener(["a", "b", ""], [[1, 2, 3, 4, 5], [7], [9, 9]])
    assert partial.progress("a") == ([1, 2, 3, 4, 5], 45 * 4.0 / 4)  # 1 s a token from here, 45 to the cap
    assert writing_words(partial, ["a", "b"]) == "writing: 6 tokens so far, about 45 s left for the turn at its pace so far"
    partial.listener(["a"], [[8]])  # shorter than before: the dialogue's next reply began
    assert partial.progress("a") == ([8], None)
    partial.done("a")
    assert partial.progress("a") is None and writing_words(partial, ["a"]) == ""
    assert seconds_left(10, 9.0, 8) == 0 and seconds_left(1, 5.0, 8) is None
    html = partial_html("<b>so far", 3, None)
    assert "&lt;b&gt;so far" in html and "3 tokens so far, reading the prompt" in html


@pytest.mark.model
def test_the_handler_shows_a_reply_being_written_before_its_turn_ends(seeded, monkeypatch):
    """With a long reply cap the default policy takes many ticks a turn: the columns show the reply in
    progress (its text so far and the tokens) while no policy turn is recorded yet."""
    monkeypatch.setattr(live_rollout, "TICK_S", 0.2)
    store, personas = seeded
    args = {**_args(personas, "default", group=1, max_turns=1), "max_new_tokens": 1024}
    seen = []
    for status, _fig, html, _finished in live_rollout.start_rollout(store, "s3", **args):
        if "turn-partial" in html and "turn-assistant" not in html:
            seen.append((status, html))
            live_rollout.stop_rollout("s3")
    assert seen, "no output showed a reply in progress"
    status, html = seen[0]
    assert re.search(r"writing: \d+ tokens? so far", status) and re.search(r"Policy</b> writing: \d+ tokens? so far",
                                                                          html)


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.model  # the offline simulated user
def test_live_view_streams_draws_and_stops(browser_page, lab_server, tiny_model_dir, screenshot):
    page = browser_page
    page.get_by_role("tab", name="Live rollout").click()
    expect(page.locator("#live-sim-note")).to_contain_text("not comparable with the Sentient benchmark")
    page.locator("#live-policy textarea").fill(str(tiny_model_dir))
    page.locator("#live-max-turns input[type=number]").fill("20")
    page.locator("#live-max-turns input[type=number]").press("Enter")
    expect(page.locator("#live-personas .token")).to_have_count(1)  # the default persona, set as the page loads
    page.click("#live-start")
    chats = page.locator("#live-chats")
    try:
        expect(chats.locator(".live-col")).to_have_count(2, timeout=180_000)
    except AssertionError as exc:  # say what the page says instead
        raise AssertionError(f"no two dialogue columns; the status reads {page.locator('#live-status').inner_text()!r}"
                             ) from exc
    # At least two policy turns streamed (turns can arrive faster than the page is polled).
    expect(chats.locator(".live-col").first.locator(".turn-assistant").nth(1)).to_be_attached(timeout=180_000)
    expect(page.locator("#live-plot .scatterlayer .trace")).to_have_count(2)
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "live.png", full_page=False)
    page.click("#live-stop")
    page.click("#live-stop")
    # "Done." only when every dialogue had already ended before Stop reached the run (a fast machine).
    expect(page.locator("#live-status")).to_contain_text(re.compile(r"Stopped|Done"), timeout=180_000)
    assert page.dialogs == []
    page.locator("#live-finished input").click()
    page.get_by_role("option").first.click()
    page.click("#live-open")
    expect(page.get_by_role("tab", name="Transcripts")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#transcript-turns .turn-assistant").first).to_be_visible()


def _start_long_turns(page, max_turns: int) -> None:
    """Live rollout on the default policy (the packaged SmolLM2: seconds a reply on a CPU, where the tiny test
    model may end one in less than a redraw), one dialogue, replies capped at 1,024 tokens."""
    page.get_by_role("tab", name="Live rollout").click()
    page.locator("#live-policy textarea").fill("default")
    if not page.locator("#live-max-new-tokens").is_visible():
        page.get_by_text("Sampling", exact=True).click()  # the accordion that holds the reply cap
    for elem, value in (("live-group", 1), ("live-max-turns", max_turns), ("live-max-new-tokens", 1024)):
        page.locator(f"#{elem} input[type=number]").fill(str(value))
        page.locator(f"#{elem} input[type=number]").press("Enter")
        expect(page.locator(f"#{elem} input[type=number]")).to_have_value(str(value))
    expect(page.locator("#live-personas .token")).to_have_count(1)
    page.click("#live-start")


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.model
def test_live_view_shows_a_reply_as_it_is_written(browser_page, lab_server):
    page = browser_page
    page.reload()
    _start_long_turns(page, max_turns=4)
    partial = page.locator("#live-chats .turn-partial")
    try:
        expect(partial).to_contain_text(re.compile(r"writing: \d+ tokens? so far"), timeout=180_000)
    except AssertionError as exc:  # say what the page says instead
        raise AssertionError(f"no reply in progress shown; the status reads "
                             f"{page.locator('#live-status').inner_text()!r}") from exc
    expect(page.locator("#live-status")).to_contain_text(re.compile(r"writing: \d+ tokens? so far"))
    page.click("#live-stop")
    expect(page.locator("#live-status")).to_contain_text(re.compile(r"Stopped|Done"), timeout=180_000)
    expect(partial).to_have_count(0)
    assert page.dialogs == []


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.model
def test_closing_the_tab_stops_its_dialogue(browser_page, lab_server):
    """A page closed mid-turn stops its dialogue: Gradio notices the page's heartbeat is gone and the view's
    unload hook cancels the run, which ends the reply being sampled."""
    from helpers import wait_for

    page = browser_page.context.browser.new_page()
    page.goto(lab_server.url)
    before = _dialogue_ids(lab_server.store)
    _start_long_turns(page, max_turns=20)
    expect(page.locator("#live-chats .turn-partial")).to_be_attached(timeout=180_000)
    dialogue_id = wait_for(lambda: (_dialogue_ids(lab_server.store) - before or {None}).pop(), timeout=60)
    replies_at_close = _replies(lab_server.store, dialogue_id)
    page.close()
    ended = wait_for(lambda: (row := _status(lab_server.store, dialogue_id)) and row[0] != "running" and row,
                     timeout=60, every=0.5)
    assert ended[1] == "cancelled" and "stopped by the user" in ended[2]
    assert _replies(lab_server.store, dialogue_id) == replies_at_close  # the reply in progress was cut, not finished


def _replies(store, dialogue_id: int) -> int:
    from storage.dialogues import load_dialogue

    return sum(t["role"] == "assistant" for t in load_dialogue(store, dialogue_id)["turns"])


def _dialogue_ids(store) -> set[int]:
    with read_scope(store) as s:
        return set(s.scalars(select(Dialogue.id)))


def _status(store, dialogue_id: int):
    with read_scope(store) as s:
        return s.execute(select(Dialogue.status, Dialogue.outcome, Dialogue.error)
                         .where(Dialogue.id == dialogue_id)).one_or_none()
