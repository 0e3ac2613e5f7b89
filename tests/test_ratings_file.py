"""A ratings file under the store's rules (simulator.evaluation.ratings.read_ratings_file and import_jsonl):
duplicates and conflicting simulator values named by line, strict types, numeric rater ids, a byte-order mark,
and encoding errors with the file and line."""
from __future__ import annotations

import json

import pytest
from helpers import make_dialogue

from simulator.evaluation import ratings
from storage.ratings import list_ratings


def _line(**over) -> str:
    row = {"dialogue_id": 1, "turn_index": 2, "rater": "ana", "delta": 3, "simulator_delta": 4,
           "fingerprint_hash": "fp-a"}
    row.update(over)
    return json.dumps({k: v for k, v in row.items() if v is not ...}, ensure_ascii=False)


def test_a_ratings_file_follows_the_stores_rules_line_by_line(tmp_path):
    path = tmp_path / "pooled.jsonl"
    lines = [_line(), _line(turn_index=4), _line(rater="ben", simulator_delta=...),  # takes the turn's value
             _line(delta=-2),  # ana again on turn 2: refused with the line it repeats
             _line(rater="cy", simulator_delta=5),  # a second simulator value for turn 2
             _line(rater="dee", delta="5"), _line(rater="eve", delta=" 7 "), _line(rater="fay", delta="1e1"),
             _line(rater="gus", delta=True), _line(rater="hal", need_category=["a"]),
             _line(rater="ivy", personality={"x": 1}), _line(rater=False), _line(rater=[1]),
             _line(simulator_delta="4", rater="jo")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as exc:
        ratings.read_ratings_file(str(path))
    message = str(exc.value)
    assert message.startswith(f"{path}: line 4: rater 'ana' already rated turn 2 of dialogue 1 (line 1)")
    assert "line 5: simulator_delta: 5 conflicts with 4 given for turn 2 of dialogue 1 on line 1" in message
    for n, field in ((6, "delta"), (7, "delta"), (8, "delta"), (9, "delta"), (10, "need_category"),
                     (11, "personality"), (12, "rater"), (13, "rater"), (14, "simulator_delta")):
        assert f"line {n}: {field}: must be" in message, (n, field)
    # the good lines alone make a report; ben's row without a simulator value still counts in the pairs
    path.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    rows = ratings.read_ratings_file(str(path))
    from simulator.evaluation.agreement import agreement, group_units

    units = group_units(rows)
    assert units[1, 2, "fp-a"]["simulator"] == 4.0 and set(units[1, 2, "fp-a"]["human"]) == {"ana", "ben"}
    assert agreement(rows, n_boot=10)["n_ratings"] == 3


def test_a_ratings_file_with_a_bom_reads_and_other_encodings_name_file_and_line(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes("\ufeff".encode() + (_line() + "\n" + _line(turn_index=4, rater=7) + "\n").encode())
    rows = ratings.read_ratings_file(str(path))
    assert [r["rater"] for r in rows] == ["ana", "7"]  # a numeric rater id is a name
    latin = tmp_path / "latin1.jsonl"
    latin.write_bytes((_line() + "\n" + _line(turn_index=4, rater="Jörg") + "\n").encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{latin.name}: line 2: not UTF-8 \(byte 0xf6 at column \d+\)"):
        ratings.read_ratings_file(str(latin))


def test_the_store_import_applies_the_same_strict_types(store):
    did = make_dialogue(store)
    text = "\n".join([_line(dialogue_id=did, delta="5"), _line(dialogue_id=did, rater=12, turn_index=4)])
    report = ratings.import_jsonl(store, "\ufeff" + text, keep_valid=True)
    assert report.imported == 1 and report.errors == ["line 1: delta: must be a number, got '5'"]
    assert [r["rater"] for r in list_ratings(store)] == ["12"]


def test_the_agreement_command_refuses_a_file_with_a_duplicate_naming_its_lines(tmp_path, capsys):
    from simulator.__main__ import main

    path = tmp_path / "pooled.jsonl"
    path.write_text("\n".join([_line(), _line(turn_index=4), _line(turn_index=6), _line(delta=1)]) + "\n")
    assert main(["agreement", "--ratings", str(path), "--n-boot", "20"]) == 1
    err = capsys.readouterr().err
    assert "line 4: rater 'ana' already rated turn 2 of dialogue 1 (line 1)" in err
    path.write_text("\n".join([_line(), _line(turn_index=4), _line(turn_index=6)]) + "\n")
    assert main(["agreement", "--ratings", str(path), "--n-boot", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["overall"]["n_ratings"] == 3 and report["overall"]["alpha"]["why"].startswith("no turn has two")
