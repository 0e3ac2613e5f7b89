"""Seeded fuzzing of profile (RLVER and lab) and SAGE transcript files: malformed lines never raise, every
bad line is named (and no good one), messages stay short and printable, and a refused file leaves the
store exactly as it was. Bounded by a case count and a time budget (the budget only stops the loop)."""
from __future__ import annotations

import json
import random
import time
from typing import Any

from sqlalchemy import select

from simulator.evaluation import transcripts
from simulator.personas import store as persona_store
from simulator.personas import transcript_files
from storage import Dialogue, Persona, Turn, read_scope

SEED = 13
CASES = 400
BUDGET_S = 30.0
HOLE = "@@HOLE@@"

# Raw JSON texts put in place of a value: wrong types, bounds, non-standard JSON, broken escapes.
RAW_VALUES = ['["just_listen"]', '{"a": [1, {"b": null}]}', "null", "true", "-0", "1e999", "NaN", "-Infinity",
              "9" * 5001, "-" + "1" * 40, '"\\ud800"', '"a\\udfffb"', '"\\u0000\\u001b[31m"', '""', '"   "',
              '"' + "x" * 25_000 + '"', "[" * 3000 + "]" * 3000, "{" * 2 + '"k":' * 0 + "}" * 2, '[[[[[[[[[[[[[[[[[[[['
              '[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]', '"负面型"', '"not_at_fault"', "12", "3.5", "[]", "{}",
              '["a", "b", "c", "d"]', '[1, 2]', '"' + "é" * 70 + '"']


def lab_record(pid: str) -> dict[str, Any]:
    return dict(id=pid, name="Mia", persona="A teacher.", background="Her friend left.", hidden_need="To be heard.",
                need_category="just_listen", personality="passive", traits=["quiet"], first_line="Hi.",
                explicit_goal="", language="en", difficulty="standard", source="user",
                extra={"events": ["I lost my job."], "tags": ["a"]})


def rlver_record(pid: str) -> dict[str, Any]:
    return {"id": pid, "player": "* 姓名：王小云", "scene": "场景", "main_cha": "负面型", "cha_group": ["愤怒"],
            "task": "你想分析事件中其他人物这么做的原因", "first_talk": "唉。", "topic": "恋爱", "lab": {"language": "zh"}}


def sage_record(pid: str) -> dict[str, Any]:
    return {"id": pid, "emo_point": 55, "emo_state": "Emotion-B", "target": "eq", "player": "p", "scene": "s",
            "character": "负面型", "topic": "t", "task": "你想分析事件中其他人物这么做的原因",
            "history": [{"role": "user", "content": "hi", "emotion-point": 40,
                         "planning": {"content": "c", "change": 0}, "thinking": "th"},
                        {"role": "assistant", "content": "hello"},
                        {"role": "user", "content": "ok", "emotion-point": 55, "planning": {"change": 15}}]}


def _paths(record: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key / index path in a record (values that can be replaced)."""
    out = []
    items = record.items() if isinstance(record, dict) else enumerate(record) if isinstance(record, list) else []
    for k, v in items:
        out.append(prefix + (k,))
        out.extend(_paths(v, prefix + (k,)))
    return out


def mutate(rng: random.Random, record: dict[str, Any]) -> bytes:
    """One malformed (or, by chance, still valid) line built from a valid record."""
    choice = rng.random()
    if choice < 0.55:  # a value replaced with a hostile raw JSON text
        path = rng.choice(_paths(record))
        target = record
        for k in path[:-1]:
            target = target[k]
        target[path[-1]] = HOLE
        text = json.dumps(record, ensure_ascii=False).replace(f'"{HOLE}"', rng.choice(RAW_VALUES), 1)
        return text.encode("utf-8")
    if choice < 0.65:  # a key removed
        path = rng.choice(_paths(record))
        target = record
        for k in path[:-1]:
            target = target[k]
        del target[path[-1]]
        return json.dumps(record, ensure_ascii=False).encode("utf-8")
    if choice < 0.75:  # an unknown key with a hostile value
        return json.dumps(record, ensure_ascii=False)[:-1].encode() + f', "z{rng.randint(0, 9)}": {rng.choice(RAW_VALUES)}}}'.encode()
    text = json.dumps(record, ensure_ascii=False).encode("utf-8")
    if choice < 0.85:  # truncated
        return text[:rng.randint(1, len(text) - 1)]
    if choice < 0.92:  # a byte flipped (often invalid UTF-8 or broken syntax); never a newline: one line stays one
        i = rng.randrange(len(text))
        return text[:i] + bytes([rng.choice([b for b in range(256) if b != 0x0A])]) + text[i + 1:]
    return rng.choice([b"[1, 2]", b'"text"', b"null", b"\xff\xfe\x00", b"{", b"{}"])


def make_file(rng: random.Random, case: int, build) -> tuple[bytes, set[int]]:
    """A file of 2-6 lines, some valid, some mutated: (bytes, the mutated line numbers)."""
    lines, mutated = [], set()
    for i in range(rng.randint(2, 6)):
        record = build(f"c{case}-{i}")
        if rng.random() < 0.5:
            lines.append(mutate(rng, record))
            mutated.add(i + 1)
        else:
            lines.append(json.dumps(record, ensure_ascii=False).encode("utf-8"))
    return b"\n".join(lines) + b"\n", mutated


def snapshot(store) -> tuple:
    with read_scope(store) as s:
        return (sorted((p.id, p.updated_at) for p in s.scalars(select(Persona))),
                sorted(s.scalars(select(Dialogue.id))), s.query(Turn).count())


def check_errors(errors: list, mutated: set[int], good_lines: set[int], n_lines: int) -> None:
    named = {e.line for e in errors}
    assert named <= mutated, f"a valid line was blamed: {named - mutated}"
    assert named | good_lines == set(range(1, n_lines + 1)), "a line was neither imported nor named"
    for e in errors:
        text = str(e)
        assert len(text) < 400 and text.startswith(f"line {e.line}: ")
        text.encode("utf-8")  # printable to a UTF-8 terminal (no lone surrogate)


def test_fuzzed_files_never_raise_name_bad_lines_and_leave_the_store_unchanged(store):
    rng = random.Random(SEED)
    deadline = time.monotonic() + BUDGET_S
    builders = [lab_record, rlver_record, sage_record]
    seen = {"profiles": 0, "transcripts": 0, "refused": 0}
    for case in range(CASES):
        if time.monotonic() > deadline:
            break
        build = builders[case % 3]
        data, mutated = make_file(rng, case, build)
        before = snapshot(store)
        if build is sage_record:
            good, errors, n_lines = transcript_files.read_transcripts(data)
            check_errors(errors, mutated, {n for n, _ in good}, n_lines)
            report = transcripts.import_file(store, data, collection=f"fuzz-{case}")
            assert len(report.dialogue_ids) == (0 if errors else len(good))
            seen["transcripts"] += 1
        else:
            report = persona_store.import_file(store, data)
            check_errors(report.errors, mutated, set(report.line_of.values()), report.n_lines)
            assert report.stored == (0 if report.errors else len(report.profiles))
            seen["profiles"] += 1
        if report.errors:
            seen["refused"] += 1
            assert snapshot(store) == before
    assert seen["profiles"] >= 10 and seen["transcripts"] >= 5 and seen["refused"] >= 10, seen
