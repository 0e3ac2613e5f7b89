"""SAGE result files with the rare things SAGE's own loop (test_npc.py) lets through: an empty or blank
user message (the loop goes on, the policy answers it), a record missing a user turn's emotion-point or
ending before the rules say, duplicate ids. The files are written here, in SAGE's format."""
from __future__ import annotations

import json

import pytest

from app.render import EMPTY_MESSAGE, dialogue_html
from simulator.personas.io import BadFileError
from trainer.benchmarking import benchmark
from trainer.benchmarking.eval_runs import scored_dialogues
from trainer.rollout.dialogue_rollout import RolloutConfig

PERSONA = {"player": "林晓，29岁，女，会计，喜欢烘焙，说话简短。", "task": "你希望对方用心倾听你的情绪宣泄",
           "scene": "连续加班一个月，项目还是被领导否定了。", "character": "被动型", "target": "eq"}


def _user(text: str, emotion: int, change: int = 0) -> dict:
    return {"role": "user", "content": text, "emotion-point": emotion, "thinking": "想一想该怎么回",
            "planning": {"activity": "有点委屈", "TargetCompletion": "部分符合", "content": "对方在安慰",
                         "analyse": "还行", "change": change}}


def _record(rid: str, history: list[dict]) -> dict:
    final = [m for m in history if m["role"] == "user"][-1]["emotion-point"]
    return {"id": rid, "emo_point": final, "emo_state": "B", **PERSONA, "history": history}


def _opening(line: str) -> dict:
    return {"role": "user", "content": line, "emotion-point": 40}


def _bot(text: str) -> dict:
    return {"role": "assistant", "content": text}


# the dialogue from the published file: an empty user message (40 -> 50), and SAGE's loop went on
EMPTY = _record("empty-message", [
    _opening("这个月我白加班了。"), _bot("听起来你真的很累，发生了什么？"),
    _user("", 50, 10), _bot("没关系，想说的时候再说，我在这儿。"),
    _user("谢谢你，我就是想找人说说。", 55, 5), _bot("我听着呢。"),
    _user("好多了，再见。", 60, 5)])
BLANK = _record("blank-message", [
    _opening("我最近睡不好。"), _bot("是有什么心事吗？"),
    _user("  \n ", 35, -5), _bot("你不想说也可以。"),
    _user("算了，拜拜。", 30, -5)])
PLAIN = _record("plain", [
    _opening("朋友又放我鸽子了。"), _bot("第三次了吧，换谁都会难受。"),
    _user("对啊，我都不想约她了。再见", 45, 5)])


def _write(path, records) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return str(path)


def _replay(store, f: str):
    cfg = benchmark.BenchmarkConfig(policy=f"replay:{f}", simulator=f"replay:{f}", profiles=f)
    return benchmark.run_benchmark(store, cfg, log=lambda _m: None)


def test_an_empty_user_message_is_a_message_like_any_other(store, tmp_path):
    f = _write(tmp_path / "edge_result.jsonl", [EMPTY, BLANK, PLAIN])
    result = _replay(store, f)
    s = result.summary
    assert (s.n, s.n_errors) == (3, 0)
    assert s.score == pytest.approx((60 + 30 + 45) / 3)  # SAGE's score: the mean final emotion
    played = {d["persona_id"]: d for d in scored_dialogues(store, result.eval_run_id)}
    for record in (EMPTY, BLANK, PLAIN):
        d = played[record["id"]]
        assert d["final_emotion"] == record["emo_point"] and not d["error"]
    # stored as said: the empty and the blank message keep their text, and the policy answered each
    from sqlalchemy import select

    from storage import Turn, read_scope

    with read_scope(store) as sess:
        turns = sess.scalars(select(Turn).where(Turn.dialogue_id == played["empty-message"]["id"])
                             .order_by(Turn.index)).all()
        said = [(t.role, t.text, t.emotion) for t in turns]
    assert said[2] == ("user", "", 50) and said[3][0] == "assistant" and len(said) == len(EMPTY["history"])


def test_the_views_show_an_empty_message_as_such():
    html = dialogue_html([{"role": "user", "text": "", "emotion": 50, "delta": 10, "index": 2},
                          {"role": "user", "text": " \n", "emotion": 45, "delta": -5, "index": 4},
                          {"role": "user", "text": "谢谢", "emotion": 55, "delta": 5, "index": 6}])
    assert html.count(EMPTY_MESSAGE) == 2 and "谢谢" in html


def test_training_still_treats_an_empty_message_as_a_simulator_fault():
    assert RolloutConfig().empty_user_message == "fail"
    with pytest.raises(ValueError, match="empty_user_message must be fail or judge"):
        RolloutConfig(empty_user_message="ignore").validate()


def test_a_missing_emotion_point_fails_that_dialogue_naming_it(store, tmp_path):
    broken = json.loads(json.dumps(EMPTY))
    broken["id"] = "no-emotion"
    del broken["history"][4]["emotion-point"]
    no_opening_point = json.loads(json.dumps(PLAIN))
    no_opening_point["id"] = "opening-without-point"
    no_opening_point["history"][0]["content"] = "她又放我鸽子了。"
    del no_opening_point["history"][0]["emotion-point"]  # SAGE starts every dialogue at 40 anyway
    f = _write(tmp_path / "edge_result.jsonl", [broken, no_opening_point])
    played = {d["persona_id"]: d for d in scored_dialogues(store, _replay(store, f).eval_run_id)}
    assert "replay of no-emotion: user message 2 has no emotion-point" in played["no-emotion"]["error"]
    assert not played["opening-without-point"]["error"]
    assert played["opening-without-point"]["final_emotion"] == 45


def test_a_record_that_stops_before_the_rules_do_fails_naming_it(store, tmp_path):
    """The record ends on a user message that neither says goodbye nor crosses a threshold: SAGE's loop
    would have asked the policy again, so the record is incomplete."""
    cut = _record("cut-short", [_opening("我失恋了。"), _bot("这一定很难受。"), _user("嗯，很难受。", 45, 5)])
    f = _write(tmp_path / "edge_result.jsonl", [cut])
    played = scored_dialogues(store, _replay(store, f).eval_run_id)
    assert "replay of cut-short: the record has no policy reply 2" in played[0]["error"]


def test_duplicate_ids_are_refused_naming_the_id_and_lines(store, tmp_path):
    again = json.loads(json.dumps(PLAIN))
    again["history"][0]["content"] = "另一个开头。"
    f = _write(tmp_path / "edge_result.jsonl", [PLAIN, EMPTY, again])
    with pytest.raises((BadFileError, benchmark.BenchmarkInputError)) as err:
        _replay(store, f)
    assert "duplicate id 'plain'" in str(err.value) and "line 1" in str(err.value)
