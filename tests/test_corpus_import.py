"""A human-played corpus at scale (simulator.corpora, simulator.evaluation.human_corpora, `python -m simulator
import-human`): record splitting reads each character a bounded number of times; a corrected release is refused
or stored as a named version, never beside the old one in a set; --keep-valid keeps the complete conversations
before a truncation; a 200,000-deep file gets the persona import's one-line refusal from every import's
command line; the import line counts the turns and ratings stored, equal to an independent count."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_data_dir

from simulator import __main__ as simulator_cli
from simulator.corpora.splitting import split_records
from simulator.evaluation.human_corpora import human_set_ids, human_sets, import_corpus
from storage.dialogues import load_dialogue
from testkit.human_corpus import esconv_conversation, esconv_text, jsonl_dialogue

DEEP = 200_000
REFUSAL = "json: nested more than 24 levels deep"


class CountingText(str):
    """A text that adds up how many characters its `count` calls scan (the splitter's line counting)."""

    scanned = 0

    def count(self, sub, start=0, end=None):  # noqa: D401 - str's signature
        stop = len(self) if end is None else min(end, len(self))
        CountingText.scanned += max(0, stop - start)
        return str.count(self, sub, start, stop)


@pytest.mark.parametrize("n", [50, 400])
def test_record_splitting_scans_each_character_a_bounded_number_of_times(n):
    text = CountingText(esconv_text(n, seed=n))
    CountingText.scanned = 0
    records = list(split_records(text, "esconv"))
    assert [where.split(" (")[0] for where, _ in records] == [f"conversation {k}" for k in range(1, n + 1)]
    assert all(isinstance(r, dict) for _, r in records)
    lines = [int(where.split("line ")[1].rstrip(")")) for where, _ in records]
    starts = [i + 1 for i, line in enumerate(text.splitlines()) if line == "  {"]
    assert lines == starts  # each conversation's line, counted from the previous one
    # newlines from the previous record, brackets within each record: at most three passes over the text, at
    # 50 conversations as at 400 (counting from the file's start for each record made it grow with n)
    assert CountingText.scanned <= 3 * len(text)


def convs(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [esconv_conversation(k, rng) for k in range(n)]


def test_a_corrected_release_is_refused_or_stored_as_a_named_version(store):
    release = convs(3)
    import_corpus(store, json.dumps(release, indent=2), "esconv", "esconv")
    corrected = json.loads(json.dumps(release))
    corrected[1]["dialog"][2]["content"] = "A corrected message."
    text = json.dumps(corrected, indent=2)
    with pytest.raises(ValueError, match=r"human:esconv: this file has 1 conversation\(s\) the set lacks \(first "
                                         r"conversation 2 \(line \d+\)\) and lacks 1 of the set's 3; nothing stored: "
                                         r"if it is a corrected release, store it as a new version with --version"):
        import_corpus(store, text, "esconv", "esconv")
    assert human_sets(store) == [{"name": "esconv", "n": 3}]  # never 4 dialogues for 3 conversations
    v2 = import_corpus(store, text, "esconv", "esconv", version="2")
    assert len(v2.dialogue_ids) == 3 and v2.corpus == "esconv@2"
    assert human_sets(store) == [{"name": "esconv", "n": 3}, {"name": "esconv@2", "n": 3}]
    d = load_dialogue(store, human_set_ids(store, "human:esconv@2")[1])
    assert d["config"]["version"] == "2" and d["config"]["version_of"] == "esconv"
    assert d["turns"][2]["text"] == "A corrected message."
    again = import_corpus(store, text, "esconv", "esconv", version="2")  # the same release again: nothing new
    assert again.dialogue_ids == [] and len(again.duplicates) == 3
    grown = import_corpus(store, json.dumps(release + convs(1, seed=9)), "esconv", "esconv")
    assert len(grown.dialogue_ids) == 1 and len(grown.duplicates) == 3  # every stored one, and one more: added
    other = json.dumps(convs(2, seed=5))
    with pytest.raises(ValueError, match="or add its new conversations to the set with --add"):
        import_corpus(store, other, "esconv", "esconv")
    assert len(import_corpus(store, other, "esconv", "esconv", add_new=True).dialogue_ids) == 2
    assert human_sets(store)[0] == {"name": "esconv", "n": 6}


def test_a_changed_conversation_of_the_same_id_is_never_added(store, tmp_path, capsys, db_url):
    lines = [json.dumps(jsonl_dialogue(k, [2, 4])) for k in range(3)]
    import_corpus(store, "\n".join(lines), "jsonl", "lab")
    fixed = jsonl_dialogue(1, [2, 5])
    lines[1] = json.dumps(fixed)
    path = tmp_path / "fixed.jsonl"
    path.write_text("\n".join(lines + [json.dumps(jsonl_dialogue(7, [3]))]), encoding="utf-8")
    cmd = ["import-human", str(path), "--format", "jsonl", "--name", "lab", "--db", db_url]
    assert simulator_cli.main(cmd + ["--add"]) == 1
    err = capsys.readouterr().err
    assert "human:lab: 1 conversation(s) of this file differ from the stored ones of the same id (line 2: id " \
           "'d1'); nothing stored" in err and "Traceback" not in err
    assert human_sets(store) == [{"name": "lab", "n": 3}]
    assert simulator_cli.main(cmd + ["--version", "fixed"]) == 0
    assert capsys.readouterr().out.startswith("human:lab@fixed: 4 dialogue(s) imported (")
    assert human_sets(store) == [{"name": "lab", "n": 3}, {"name": "lab@fixed", "n": 4}]


@pytest.mark.parametrize("cut", ["inside the 90th", "after the 89th"])
def test_keep_valid_keeps_the_complete_conversations_before_a_truncation(store, cut):
    full = json.dumps(convs(90), indent=2)
    start_90 = full.rindex('\n  {\n    "experience_type"')
    text = full[:start_90 + 900] if cut == "inside the 90th" else full[:start_90].rstrip(",")
    nothing = import_corpus(store, text, "esconv", "esconv")
    assert nothing.dialogue_ids == [] and human_sets(store) == [] and len(nothing.errors) == 1
    if cut == "inside the 90th":
        assert nothing.errors[0].startswith("conversation 90 (line ") and \
            nothing.errors[0].endswith("; the file ends inside it (truncated?)")
    else:
        assert nothing.errors[0].endswith("the JSON array is not closed: the file ends after conversation 89 "
                                          "(truncated?)")
    kept = import_corpus(store, text, "esconv", "esconv", keep_valid=True)
    assert len(kept.dialogue_ids) == 89 and kept.errors == nothing.errors
    whole = import_corpus(store, full, "esconv", "esconv")  # the complete download afterwards: the one missing
    assert len(whole.dialogue_ids) == 1 and len(whole.duplicates) == 89 and whole.errors == []


def test_a_syntax_error_keeps_the_conversations_before_it_and_names_the_rest_unreadable(store):
    text = json.dumps(convs(5), indent=2)
    at = text.index('"situation"', text.index('"experience_type"', text.index('"experience_type"') + 1) + 1)
    broken = text[:at] + "situation: 1," + text[at:]
    report = import_corpus(store, broken, "esconv", "esconv", keep_valid=True)
    assert len(report.dialogue_ids) == 1 and len(report.errors) == 1
    assert report.errors[0].startswith("conversation 2 (line ") and \
        report.errors[0].endswith("; the conversations after it cannot be read")


def deep_files(folder: Path) -> dict[str, Path]:
    files = {"deep": folder / "deep.json", "field": folder / "deep-field.json"}
    files["deep"].write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")
    files["field"].write_text('[{"dialog": ' + "[" * DEEP + "]" * DEEP + "}]", encoding="utf-8")
    return files


@pytest.mark.parametrize("command, expected", [
    (["import-human", "{deep}", "--format", "esconv"], f"conversation 1 (line 1): {REFUSAL}"),
    (["import-human", "{field}", "--format", "esconv"], "conversation 1 (line 1): dialog: nested more than 24"),
    (["import-human", "{deep}", "--format", "jsonl"], f"line 1: {REFUSAL}"),
    (["agreement", "--ratings", "{deep}"], f"deep.json: line 1: {REFUSAL}"),
    (["personas", "import", "{deep}"], f"line 1: {REFUSAL}"),
    (["transcripts", "import", "{deep}"], f"line 1: {REFUSAL}"),
], ids=["corpus esconv", "corpus esconv field", "corpus jsonl", "ratings", "personas", "transcripts"])
def test_every_import_refuses_a_200k_deep_file_in_one_line(tmp_path, capsys, db_url, command, expected):
    files = deep_files(tmp_path)
    argv = [files["field"] if a == "{field}" else files["deep"] if a == "{deep}" else a for a in command]
    assert simulator_cli.main([str(a) for a in argv] + ([] if command[0] == "agreement" else ["--db", db_url])) == 1
    captured = capsys.readouterr()
    assert expected in captured.err and "Traceback" not in captured.err + captured.out
    assert "RecursionError" not in captured.err + captured.out


def test_the_import_line_counts_the_turns_and_ratings_stored(store, tmp_path, capsys, db_url):
    release = convs(12, seed=4)
    path = tmp_path / "ESConv.json"
    path.write_text(json.dumps(release, indent=2), encoding="utf-8")
    assert simulator_cli.main(["import-human", str(path), "--format", "esconv", "--db", db_url]) == 0
    line = capsys.readouterr().out.strip()
    turns = ratings = pairs = 0
    for conv in release:  # an independent count: a turn is a run of messages by one speaker
        speakers = [t["speaker"] for t in conv["dialog"]]
        turns += 1 + sum(a != b for a, b in zip(speakers, speakers[1:]))
        ratings += sum(bool(t["annotation"].get("feedback")) for t in conv["dialog"])
        pairs += bool(conv["survey_score"]["seeker"].get("final_emotion_intensity"))
    assert line == (f"human:esconv: 12 dialogue(s) imported ({turns:,} turns, {ratings:,} people's ratings on "
                    f"{ratings:,} turns, {pairs:,} pre/post pairs)")
    stored = [load_dialogue(store, i) for i in human_set_ids(store, "human:esconv")]
    assert sum(len(d["turns"]) for d in stored) == turns
    assert sum("score" in t["inner"] for d in stored for t in d["turns"]) == ratings


@pytest.mark.data
def test_the_shared_esconv_file_is_counted_whole(store, tmp_path):
    path = shared_data_dir() / "esconv" / "esconv-failed-136.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (set RLVER_SHARED_DATA)")
    release = json.loads(path.read_text(encoding="utf-8"))
    report = import_corpus(store, path.read_text(encoding="utf-8"), "esconv", "esconv")
    feedback = sum(str(t.get("annotation", {}).get("feedback") or "").strip() != "" for c in release
                   for t in c["dialog"])
    assert len(report.dialogue_ids) == len(release) == 136 and report.errors == []
    assert report.ratings == feedback == 650 and report.state_pairs == 98
    assert report.counts()["turns"] == sum(len(load_dialogue(store, i)["turns"]) for i in report.dialogue_ids)
