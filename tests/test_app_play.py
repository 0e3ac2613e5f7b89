"""Play the user in a real browser: a person talks to the tiny policy as a built-in persona, sets their own
emotion (bad values refused with a message, nothing lost), and sees the simulator's shadow judgement only after
answering; the dialogue and the shadow are in the store and Transcripts draws both curves."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from app.services.play import release_policies
from app.views.transcripts import dialogue_view
from storage.dialogues import load_dialogue
from storage.ratings import shadows_of


def _dialogue_id(store) -> int:
    from sqlalchemy import select

    from storage import Dialogue, read_scope

    with read_scope(store) as s:
        return s.scalars(select(Dialogue.id).where(Dialogue.source == "human")).one()


@pytest.mark.browser
@pytest.mark.model
def test_play_view_stores_the_person_and_reveals_the_shadow_after(browser_page, lab_server, tiny_model_dir):
    page, store = browser_page, lab_server.store
    page.get_by_role("tab", name="Play the user").click()
    expect(page.locator("#play-card")).to_contain_text("Hidden need")
    expect(page.locator("#play-opening textarea")).not_to_have_value("")  # the persona's first line
    page.locator("#play-player textarea").fill("ana")
    page.locator("#play-policy textarea").fill(str(tiny_model_dir))
    page.locator("#play-max-turns input").fill("3")
    page.click("#play-start")
    expect(page.locator("#play-chat .turn-assistant")).to_have_count(1)
    dialogue_id = _dialogue_id(store)
    assert shadows_of(store, dialogue_id) == []
    expect(page.locator("#play-shadow")).not_to_contain_text("simulator")

    page.locator("#play-message textarea").fill("It is quiet at home.")
    expect(page.locator("#play-emotion input")).to_have_value("")  # no emotion until the person sets one
    page.click("#play-send")
    expect(page.locator("#err-play-emotion")).to_contain_text("emotion: set 'Your emotion now' (0-100) before sending")
    expect(page.locator("#play-status")).to_contain_text("fix the field marked")
    assert len(load_dialogue(store, dialogue_id)["turns"]) == 2
    page.locator("#play-emotion input").fill("150")
    page.click("#play-send")
    expect(page.locator("#err-play-emotion")).to_contain_text("emotion: must lie between 0 and 100")
    expect(page.locator("#play-message textarea")).to_have_value("It is quiet at home.")  # nothing lost
    assert len(load_dialogue(store, dialogue_id)["turns"]) == 2 and shadows_of(store, dialogue_id) == []

    page.locator("#play-emotion input").fill("55")
    page.locator("#play-thoughts textarea").fill("it did not push me")
    page.click("#play-send")
    expect(page.locator("#play-shadow")).to_contain_text("The simulator would have felt")
    expect(page.locator("#play-chat .turn-assistant")).to_have_count(2)
    expect(page.locator("#play-plot .scatterlayer .trace")).to_have_count(2)  # the person's curve and the shadow's
    stored = shadows_of(store, dialogue_id)
    assert [(s["turn_index"], s["emotion_before"]) for s in stored] == [(2, 40.0)] and stored[0]["delta"] is not None
    d = load_dialogue(store, dialogue_id)
    assert d["source"] == "human" and d["config"]["player"] == "ana"
    assert (d["turns"][2]["emotion"], d["turns"][2]["delta"], d["turns"][2]["inner"]["thoughts"]) == \
        (55.0, 15.0, "it did not push me")

    expect(page.locator("#play-emotion input")).to_have_value("")  # emptied again, the last value beside it
    expect(page.locator("#play-emotion")).to_contain_text("your last: 55")
    page.locator("#play-message textarea").fill("I have to go.")
    page.locator("#play-emotion input").fill("20")
    page.click("#play-end")
    expect(page.locator("#play-status")).to_contain_text("Dialogue ended: you ended it, at emotion 20.")
    assert load_dialogue(store, dialogue_id)["status"] == "finished" and len(shadows_of(store, dialogue_id)) == 2
    # Transcripts draws the person's curve and the simulator's
    _, fig, _ = dialogue_view(store, dialogue_id)
    assert [t.name for t in fig.data] == [f"#{dialogue_id} person", "simulator (shadow)"]
    assert list(fig.data[0].y) == [40.0, 55.0, 20.0] and len(fig.data[1].y) == 3
    assert page.dialogs == []

    # End with nothing written ends at the last emotion and stores no empty turn
    page.click("#play-start")
    expect(page.locator("#play-chat .turn-assistant")).to_have_count(1)
    page.click("#play-end")
    expect(page.locator("#play-status")).to_contain_text("Dialogue ended: you ended it, at emotion 40.")
    from sqlalchemy import select

    from storage import Dialogue, read_scope

    with read_scope(store) as s:
        second = s.scalars(select(Dialogue.id).where(Dialogue.source == "human").order_by(Dialogue.id.desc())).first()
    d = load_dialogue(store, second)
    assert [t["role"] for t in d["turns"]] == ["user", "assistant"] and d["outcome"] == "player_ended"
    release_policies()


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.model
def test_play_streams_the_reply_and_a_closed_tab_abandons_the_dialogue(browser_page, lab_server):
    """The reply shows as it is written (tokens so far under the dialogue, as in Live rollout), then stands as a
    turn; a page closed mid-dialogue ends it as abandoned, kept in the store."""
    import re

    from helpers import wait_for

    store = lab_server.store
    page = browser_page.context.browser.new_page()
    page.goto(lab_server.url)
    page.get_by_role("tab", name="Play the user").click()
    expect(page.locator("#play-card")).to_contain_text("Hidden need")
    page.locator("#play-policy textarea").fill("default")  # SmolLM2: a reply of seconds, written token by token
    page.locator("#play-opening textarea").fill("I could not sleep again. Everything feels heavy and I keep "
                                                "going over what my sister said; can you tell me what you think?")
    page.click("#play-start")
    partial = page.locator("#play-chat .turn-partial")
    expect(partial).to_contain_text(re.compile(r"writing: \d+ tokens? so far"), timeout=180_000)
    expect(page.locator("#play-status")).to_contain_text("The policy is writing its reply")
    expect(page.locator("#play-chat .turn-assistant")).to_have_count(1, timeout=900_000)  # 96 tokens on a busy CPU
    expect(partial).to_have_count(0)
    with __import__("storage").read_scope(store) as s:
        from sqlalchemy import select

        from storage import Dialogue

        dialogue_id = s.scalars(select(Dialogue.id).where(Dialogue.source == "human")
                                .order_by(Dialogue.id.desc())).first()
    assert load_dialogue(store, dialogue_id)["status"] == "running"
    page.close()
    ended = wait_for(lambda: (d := load_dialogue(store, dialogue_id))["status"] != "running" and d, timeout=120,
                     every=0.5)
    assert (ended["status"], ended["outcome"]) == ("cancelled", "abandoned")
    assert [t["role"] for t in ended["turns"]] == ["user", "assistant"]  # kept as it stood
    release_policies()
