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
