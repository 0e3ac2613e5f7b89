"""Human-played corpora into the store (simulator.evaluation.human_corpora, `python -m simulator import-human`):
ESConv's format in its speaker spellings with consecutive turns, the lab's JSONL, every people's rating kept,
every bad conversation named, all-or-nothing or keep-the-good, re-imports skipped. Samples written for the lab."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from helpers import BACKENDS

from simulator.evaluation.human_corpora import human_set_ids, human_sets, import_corpus, read_corpus
from storage.dialogues import load_dialogue
from testkit.human_corpus import esconv_conversation, esconv_text, jsonl_dialogue


@pytest.mark.parametrize("spelling", ["seeker", "usr", "speaker"])
def test_esconv_keeps_every_rating_and_merges_consecutive_turns(store, spelling):
    text = esconv_text(4, seed=1, spelling=spelling)
    published = json.loads(text)
    report = import_corpus(store, text, "esconv", "esconv", file_name="ESConv.json")
    assert report.errors == [] and len(report.dialogue_ids) == 4
    assert human_set_ids(store, "human:esconv") == report.dialogue_ids
    for conv, did in zip(published, report.dialogue_ids):
        d = load_dialogue(store, did)
        assert d["source"] == "human" and d["collection"] == "esconv"
        roles = [t["role"] for t in d["turns"]]
        assert all(a != b for a, b in zip(roles, roles[1:]))  # consecutive supporter messages merged
        feedback = [float(t["annotation"]["feedback"]) for t in conv["dialog"] if t["annotation"].get("feedback")]
        assert [t["inner"]["score"] for t in d["turns"] if "score" in t["inner"]] == feedback
        seeker = conv["survey_score"]["seeker"]
        assert d["config"]["state"] == {"pre": float(seeker["initial_emotion_intensity"]),
                                        "post": float(seeker["final_emotion_intensity"]), "scale": [1.0, 5.0],
                                        "better": "lower"}
        assert d["config"]["groups"] == {"problem_type": conv["problem_type"], "emotion_type": conv["emotion_type"]}
        assert d["persona_snapshot"]["background"] == conv["situation"]
        assert conv["emotion_type"] in d["persona_snapshot"]["persona"]
        merged = [t for t in d["turns"] if t["inner"].get("messages") == 2]
        assert merged and all("\n" in t["text"] and t["role"] == "assistant" for t in merged)
    again = import_corpus(store, text, "esconv", "esconv")
    assert again.dialogue_ids == [] and len(again.duplicates) == 4  # a re-import stores nothing twice
    assert human_sets(store) == [{"name": "esconv", "n": 4}]


@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_bad_conversations_are_named_and_nothing_stored_unless_keep_valid(store):
    rng = np.random.default_rng(0)
    convs = [esconv_conversation(k, rng) for k in range(5)]
    convs[1]["dialog"][2]["speaker"] = "bot"
    convs[2]["dialog"][4]["annotation"]["feedback"] = "great"
    convs[3]["survey_score"]["seeker"]["final_emotion_intensity"] = "9"
    convs[4]["dialog"] = []
    text = json.dumps(convs, indent=2)
    report = import_corpus(store, text, "esconv", "esconv")
    assert report.dialogue_ids == [] and human_sets(store) == []
    assert len(report.errors) == 4
    assert report.errors[0].startswith("conversation 2 (line ") and "dialog[2].speaker: unknown speaker 'bot'" in \
        report.errors[0]
    assert "conversation 3 " in report.errors[1] and "annotation.feedback: must be a number, got 'great'" in \
        report.errors[1]
    assert "final_emotion_intensity: 9 lies outside the scale [1, 5]" in report.errors[2]
    assert "conversation 5 " in report.errors[3] and "dialog: must be a non-empty list" in report.errors[3]
    line = int(report.errors[0].split("(line ")[1].split(")")[0])
    assert text.splitlines()[line - 1].strip() == "{"  # the line where conversation 2 starts
    kept = import_corpus(store, text, "esconv", "esconv", keep_valid=True)
    assert len(kept.dialogue_ids) == 1 and len(kept.errors) == 4


def test_the_generic_jsonl_is_strict_and_keeps_scores_and_state(store):
    lines = [json.dumps(jsonl_dialogue(0, [2, 4, 5])), json.dumps(jsonl_dialogue(1, [3, 3]))]
    bad = dict(jsonl_dialogue(2, [1]))
    bad["turns"][2]["score"] = "4"
    lines.append(json.dumps(bad))
    bad = dict(jsonl_dialogue(3, [1]), score_scale=None)
    lines.append(json.dumps(bad))
    lines.append(json.dumps({**jsonl_dialogue(4, [1]), "state": {"pre": 1, "post": 2, "scale": [1, 5]}}))
    lines.append("{not json")
    report = import_corpus(store, "\n".join(lines), "jsonl", "lab-people", keep_valid=True)
    assert len(report.dialogue_ids) == 2
    assert report.errors == [
        "line 3: turns[2].score: must be a number, got '4'",
        "line 4: turns[2].score: declare the dialogue's score_scale [lowest, highest] first",
        "line 5: state.better: must be \"lower\" or \"higher\", got None",
        "line 6: json: malformed JSON: Expecting property name enclosed in double quotes (column 2)"]
    d = load_dialogue(store, report.dialogue_ids[0])
    assert [t["inner"].get("score") for t in d["turns"]] == [None, None, 2.0, None, 4.0, None, 5.0]
    assert d["external_id"] == "d0" and d["config"]["score_scale"] == [1.0, 5.0]
    with pytest.raises(ValueError, match="--name: a corpus name"):
        read_corpus("", "jsonl", "bad name")
    with pytest.raises(ValueError, match="names no stored human dialogues .*human:lab-people"):
        human_set_ids(store, "human:other")


@pytest.mark.process
def test_import_human_command(db_url, tmp_path):
    path = tmp_path / "ESConv.json"
    path.write_text(esconv_text(3, seed=2, spelling="usr"), encoding="utf-8")
    cmd = [sys.executable, "-m", "simulator", "import-human", str(path), "--format", "esconv", "--db", db_url]
    out = subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["imported"] == 3 and json.loads(out.stdout)["set"] == "human:esconv"
    latin = tmp_path / "latin.json"
    latin.write_bytes(esconv_text(1).replace("struggling", "m\u00fcde").encode("latin-1"))
    out = subprocess.run(cmd[:4] + [str(latin)] + cmd[5:], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "latin.json: line " in out.stderr and "not UTF-8" in out.stderr
