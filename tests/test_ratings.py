"""Rating rounds against a real SQLite store: rating sets, blind items, bad input, pooling as JSONL, the
`simulator agreement` command, and the play service's shadow judgements (tiny policy, offline simulator)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import make_dialogue

from simulator.evaluation import ratings
from simulator.personas.builtin import get_builtin
from storage import dialogues
from storage.ratings import DuplicateRating, list_ratings, shadows_of
from testkit.scripted_rater import ScriptedRater


def test_rating_sets_name_dialogues_and_bad_sets_say_why(store):
    a = make_dialogue(store)
    b = make_dialogue(store, persona_id="en-32-zoe-kim", fp="fp-other")
    assert ratings.set_dialogue_ids(store, "persona:en-01-maya-chen") == [a]
    assert ratings.set_dialogue_ids(store, "fingerprint:fp-oth") == [b]
    assert ratings.set_dialogue_ids(store, f"dialogue:{b}") == [b]
    with pytest.raises(ValueError, match="rating set: 'eval:7' names no stored dialogues"):
        ratings.set_dialogue_ids(store, "eval:7")
    with pytest.raises(ValueError, match="rating set: .* is not a rating set"):
        ratings.set_dialogue_ids(store, "everything")
    with pytest.raises(ValueError, match="eval: needs a numeric id"):
        ratings.set_dialogue_ids(store, "eval:last")
    items = ratings.rating_queue(store, "persona:builtin", "ana")
    assert [(i["dialogue_id"], i["turn_index"]) for i in items] == [(d, t) for d in (a, b) for t in (2, 4, 6, 8)]


def test_blind_view_hides_the_simulator_and_reveal_comes_after_rating(store):
    did = make_dialogue(store)
    view = ratings.blind_view(store, did, 4)
    assert view["reply"] == "reply 2"
    assert [m["text"] for m in view["history"]] == ["opening", "reply 1", "answer 1"]
    assert set(view) == {"persona", "history", "reply"} and all(set(m) == {"role", "text"} for m in view["history"])
    text = json.dumps([view["history"], view["reply"]])
    assert "-6" not in text and "emotion" not in text and "felt" not in text and "answer 2" not in text
    judged = ratings.record_rating(store, "ana", did, 4, -3, rating_set="persona:builtin")
    assert ratings.reveal(judged) == {"simulator_delta": -6.0, "thoughts": {"analyse": "felt -6"}}
    assert [(i["dialogue_id"], i["turn_index"]) for i in ratings.rating_queue(store, f"dialogue:{did}", "ana")] == \
        [(did, 2), (did, 6), (did, 8)]


def test_bad_ratings_get_a_message_and_lose_nothing(store):
    did = make_dialogue(store)
    ratings.record_rating(store, "ana", did, 2, 3)
    with pytest.raises(DuplicateRating, match="'ana' already rated turn 2"):
        ratings.record_rating(store, "ana", did, 2, -9)
    with pytest.raises(ValueError, match="change: must lie between -100 and 100"):
        ratings.record_rating(store, "ana", did, 4, 150)
    with pytest.raises(ValueError, match="change: must be a number"):
        ratings.record_rating(store, "ana", did, 4, "lots")
    with pytest.raises(ValueError, match="rater: a name is required"):
        ratings.record_rating(store, " ", did, 4, 1)
    with pytest.raises(ValueError, match="turn: turn 3 .* is not a judged user turn"):
        ratings.record_rating(store, "ana", did, 3, 1)
    assert [(r["rater"], r["turn_index"], r["delta"], r["simulator_delta"]) for r in list_ratings(store)] == \
        [("ana", 2, 3.0, 4.0)]


def test_jsonl_pooling_all_or_nothing_or_reporting_each_bad_line(store, tmp_path):
    did = make_dialogue(store)
    rater = ScriptedRater("ben", bias=1.0, noise_sd=1.0)
    items = ratings.judged_turns(store, did)
    lines = [json.dumps(r) for r in rater.ratings([{k: i[k] for k in ("dialogue_id", "turn_index",
                                                                        "simulator_delta")} for i in items])]
    bad = lines + ['{"dialogue_id": 1, "turn_index": 2, "rater": "ben", "delta": 5}',  # ben rated it above
                   '{"dialogue_id": 1, "turn_index": 2, "rater": "cy", "delta": 500}', "not json",
                   '{"dialogue_id": 999, "turn_index": 2, "rater": "cy", "delta": 1}']
    report = ratings.import_jsonl(store, "\n".join(bad))
    assert report.imported == 0 and list_ratings(store) == []
    assert [e.split(":")[0] for e in report.errors] == ["line 5", "line 6", "line 7", "line 8"]
    assert "already rated" in report.errors[0] and "delta: must lie between" in report.errors[1]
    assert "dialogue: 999 does not exist" in report.errors[3]
    report = ratings.import_jsonl(store, "\n".join(bad), keep_valid=True)
    assert report.imported == 4 and len(report.errors) == 4
    exported = ratings.export_jsonl(store)
    rows = [json.loads(x) for x in exported.splitlines()]
    assert {r["rater"] for r in rows} == {"ben"} and rows[0]["need_category"] == "dialectical_analysis"
    # the exported file is a report's input on its own, and pooled ratings agree with their rater
    path = tmp_path / "ratings.jsonl"
    path.write_text(exported)
    assert ratings.read_ratings_file(str(path))[1]["simulator_delta"] == -6.0


@pytest.mark.process
def test_agreement_command_prints_the_report_from_a_file_and_a_store(store, db_url, tmp_path):
    dids = [make_dialogue(store, changes=[float(c) for c in range(-9, 10, 3)]) for _ in range(3)]
    items = [i for d in dids for i in ratings.judged_turns(store, d)]
    for r in ScriptedRater("ana", noise_sd=1.5, seed=1).ratings(items) + \
            ScriptedRater("ben", noise_sd=1.5, seed=2).ratings(items):
        ratings.record_rating(store, r["rater"], r["dialogue_id"], r["turn_index"], r["delta"])
    path = tmp_path / "ratings.jsonl"
    path.write_text(ratings.export_jsonl(store))
    for source in (["--ratings", str(path)], ["--db", db_url]):
        out = subprocess.run([sys.executable, "-m", "simulator", "agreement", *source, "--json", "--n-boot", "100"],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        report = json.loads(out.stdout)
        assert report["overall"]["n_units"] == len(items) and report["overall"]["n_raters"] == 2
        assert report["overall"]["spearman"]["value"] > 0.8 and report["overall"]["alpha"]["n"] == len(items)
        assert set(report["by_fingerprint_hash"]) == {"fp-offline"}
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = subprocess.run([sys.executable, "-m", "simulator", "agreement", "--ratings", str(empty)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "the rating set is empty" in out.stderr


def test_play_stores_turns_and_shadow_judgements_after_each_answer(store, tiny_model_dir):
    from app.services import play

    profile = get_builtin("adv-01-curt-rosa-ibarra")
    with pytest.raises(ValueError, match="message: write your opening"):
        play.start_play(store, profile, " ", "ana", str(tiny_model_dir))
    state = play.start_play(store, profile, profile.first_line, "ana", str(tiny_model_dir), max_turns=2,
                            max_new_tokens=8)
    assert shadows_of(store, state.dialogue_id) == []  # nothing judged before the person answered
    for bad in (101, -1, "calm"):
        with pytest.raises(ValueError, match="emotion: must"):
            play.answer(store, state, "ok", bad)
    assert len(dialogues.load_dialogue(store, state.dialogue_id)["turns"]) == 2  # the bad answers lost nothing
    shadow = play.answer(store, state, "Fine.", 45, "a bit better")
    stored = shadows_of(store, state.dialogue_id)
    assert [(s["turn_index"], s["emotion_before"], s["delta"]) for s in stored] == [(2, 40.0, shadow["delta"])]
    assert stored[0]["fingerprint"]["backend"] == "offline" and stored[0]["inner"]
    play.answer(store, state, "Whatever.", 30)
    d = dialogues.load_dialogue(store, state.dialogue_id)
    assert d["source"] == "human" and d["config"]["player"] == "ana" and d["outcome"] == "max_turns"
    assert [(t["role"], t["emotion"], t["delta"]) for t in d["turns"] if t["role"] == "user"] == \
        [("user", 40.0, 0.0), ("user", 45.0, 5.0), ("user", 30.0, -15.0)]
    assert d["turns"][2]["inner"]["thoughts"] == "a bit better"
    assert play.shadow_emotions(store, d)[0] == 40.0 and len(play.shadow_emotions(store, d)) == 3
    # a played dialogue is a rating item (its simulator value the shadow's) and an agreement row
    assert [i["simulator_delta"] for i in ratings.judged_turns(store, state.dialogue_id)] == \
        [s["delta"] for s in shadows_of(store, state.dialogue_id)]
    rows = ratings.agreement_rows(store)
    assert [(r["rater"], r["delta"]) for r in rows] == [("ana", 5.0), ("ana", -15.0)]
    play.release_policies()


def test_play_needs_an_emotion_set_and_end_stores_no_empty_turn(store, tiny_model_dir):
    from app.render import split_turn_problems
    from app.services import play

    profile = get_builtin("adv-01-curt-rosa-ibarra")
    state = play.start_play(store, profile, profile.first_line, "ana", str(tiny_model_dir), max_turns=4,
                            max_new_tokens=4)
    reply = dialogues.load_dialogue(store, state.dialogue_id)["turns"][1]
    assert reply["error"].startswith("reply cut at 4 tokens")  # a capped reply is a note, not 'length'
    assert split_turn_problems(reply["error"])[1] == []
    for empty in (None, "", "  "):  # an untouched box is never read as 0
        with pytest.raises(ValueError, match=r"emotion: set 'Your emotion now' \(0-100\) before sending; after "
                                             r"your last turn it was 40"):
            play.answer(store, state, "ok", empty)
    assert len(dialogues.load_dialogue(store, state.dialogue_id)["turns"]) == 2
    play.answer(store, state, "Fine.", 55)
    with pytest.raises(ValueError, match=r"message: an emotion is stored with an answer.*\(55\)"):
        play.answer(store, state, "", 20, end=True)
    play.answer(store, state, "  ", None, end=True)
    d = dialogues.load_dialogue(store, state.dialogue_id)
    assert [t["text"] for t in d["turns"] if t["role"] == "user"] == [profile.first_line, "Fine."]  # no empty turn
    assert (d["status"], d["outcome"], d["final_emotion"]) == ("finished", play.PLAYER_ENDED, 55.0)
    assert play.ending_text(state) == "Dialogue ended: you ended it, at emotion 55."
    with pytest.raises(ValueError, match=r"already ended \(you ended it\)"):
        play.answer(store, state, "more", 50)
    play.release_policies()
