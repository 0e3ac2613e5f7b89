"""Human-played corpora: dialogues where real people played the user and rated the other side, read into the
store as human dialogues (source "human", collection = the corpus name) so any simulated user can be measured
against those people (trainer.benchmarking.shadow_jobs, simulator.evaluation.human_agreement).

Two formats (docs/human-evaluation.md has both in full):

  esconv  ESConv's release (Liu et al., ACL 2021): a JSON array of conversations (or one per line) with
          situation, problem_type, emotion_type, survey_score.seeker (initial / final emotion intensity 1-5,
          empathy, relevance) and dialog: turns with speaker (seeker / supporter; usr / sys; speaker /
          listener), content and annotation (strategy on supporter turns, feedback 1-5 on some seeker turns).
          The seeker is the user, the supporter the policy; feedback is the people's score of the help so far;
          intensity falls as the seeker feels better (state_better "lower").
  jsonl   one dialogue a line: {"id", "score_scale": [lo, hi], "turns": [{"role": "user"|"policy", "text",
          "score"?}], "state": {"pre", "post", "scale": [lo, hi], "better": "lower"|"higher"}?,
          "persona": {"situation", "problem_type", "emotion_type", or profile fields}?, "policy": who supported
          the person (a model, checkpoint or supporter's id; the dialogue's policy_ref, else people:NAME)?}

Reading (simulator.corpora): one pass over the file, each record through the bounded decoder every import
uses; consecutive messages by one speaker become one turn (texts joined by a newline, the last score kept,
every score listed). Stored per user turn: inner.score (and inner.scores); per dialogue: config.score_scale,
config.state, config.groups {problem_type, emotion_type}, config.survey, config.sha256 (the conversation's
content). Import is all-or-nothing unless keep_valid, and names every bad conversation by its position and
line; with keep_valid the complete conversations before a truncation are kept.

Re-imports. A conversation is known in a set by its id (the JSONL "id"; an ESConv conversation has none, so its
content's hash). The same conversation again is skipped. A file that brings conversations the set lacks while
the set holds some the file lacks (a corrected release: ESConv's corrected conversations have new hashes), or
one whose conversations differ from the stored ones of the same id, is refused: stored as a named new version
(version="2": the set NAME@2, the old set untouched, each dialogue's config naming the version) it never sits
beside the old one in one set; add_new=True says the file's new conversations are additions, not corrections.
A file holding every stored conversation and more adds the rest (a complete download after a truncated one).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sqlalchemy import insert, select

from simulator.corpora.records import FORMATS, GROUP_KEYS, merge_turns, persona_profile, read_esconv, read_generic
from simulator.corpora.splitting import split_records
from simulator.llm.hashing import canonical_json
from simulator.personas.profile import ProfileError
from storage import Dialogue, Turn, code_version, read_scope, session_scope

__all__ = ["FORMATS", "GROUP_KEYS", "HumanImport", "human_set_ids", "human_sets", "import_corpus", "read_corpus"]

# (stage "reading" | "storing", conversations read so far | to store), called outside any transaction of the
# store's; an exception it raises stops the import with nothing stored
Progress = Callable[[str, int], None]
PROGRESS_EVERY = 200  # conversations between two progress calls (and rows per insert)


@dataclass
class HumanImport:
    """What an import did: the stored dialogue ids and what they hold, one message per bad conversation, and
    the conversations already in the set (skipped)."""

    corpus: str
    dialogue_ids: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    turns: int = 0  # turns stored (consecutive messages of one speaker merged)
    ratings: int = 0  # people's scores stored (every one of a merged turn)
    rated_turns: int = 0  # user turns carrying a score
    state_pairs: int = 0  # dialogues with the person's state before and after

    def counts(self) -> dict[str, Any]:
        return {"set": f"human:{self.corpus}", "imported": len(self.dialogue_ids), "turns": self.turns,
                "ratings": self.ratings, "rated_turns": self.rated_turns, "state_pairs": self.state_pairs,
                "duplicates": len(self.duplicates), "bad": len(self.errors)}

    def summary(self) -> str:
        text = (f"human:{self.corpus}: {len(self.dialogue_ids)} dialogue(s) imported ({self.turns:,} turns, "
                f"{self.ratings:,} people's ratings on {self.rated_turns:,} turns, {self.state_pairs:,} pre/post "
                "pairs)")
        if self.duplicates:
            text += f", {len(self.duplicates)} already in the set (unchanged, skipped)"
        if self.errors:
            text += f", {len(self.errors)} bad: " + "; ".join(self.errors[:20])
        return text


def check_name(value: str, option: str) -> str:
    if not value or not all(c.isalnum() or c in "-_." for c in value) or len(value) > 100:
        raise ValueError(f"{option}: a corpus name of letters, digits, - _ . (at most 100), got {value!r}")
    return value


def read_corpus(text: str, fmt: str, corpus: str, max_conversations: int = 0, bound: str = "",
                progress: Optional[Progress] = None) -> tuple[list[dict[str, Any]], list[str]]:
    """(normalised dialogues, one message per bad conversation). ValueError on an unknown format or name, or
    when the file holds more than max_conversations (> 0) conversations (`bound` says whose bound it is)."""
    if fmt not in FORMATS:
        raise ValueError(f"--format: one of {', '.join(FORMATS)}, got {fmt!r}")
    check_name(corpus, "--name")
    good, errors, n = [], [], 0
    for where, record in split_records(text.removeprefix("\ufeff"), fmt):
        n += 1
        if max_conversations and n > max_conversations:
            raise ValueError(f"file: holds more than {max_conversations:,} conversations, {bound or 'the bound'}; "
                             "nothing stored (import it with `python -m simulator import-human`, or in parts)")
        if progress and n % PROGRESS_EVERY == 0:
            progress("reading", n)
        try:
            if isinstance(record, ValueError):
                raise record
            d = (read_esconv if fmt == "esconv" else read_generic)(record, where)
            d["turns"] = merge_turns(d["turns"])
            if {t["role"] for t in d["turns"]} != {"assistant", "user"}:
                raise ValueError(f"{where}: needs turns of both the user and the policy")
            d["sha256"] = hashlib.sha256(canonical_json(record).encode()).hexdigest()
            d["id"] = d["id"] or d["sha256"][:12]
            d["profile"] = persona_profile(corpus, d["id"], d["groups"], d["situation"], d["persona"])
            d["where"] = where
        except ProfileError as exc:
            errors.append(f"{where}: persona: " + "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))
            continue
        except ValueError as exc:
            errors.append(str(exc))
            continue
        good.append(d)
    return good, errors


def release_conflict(corpus: str, stored: dict[str, str], dialogues: list[dict[str, Any]], add_new: bool) -> str:
    """Why the file may not go into the set holding `stored` ({id: content hash}) ('' when it may): a
    conversation stored under its id with other content, or new conversations while the set holds some the
    file lacks (unless add_new)."""
    fix = (f"if it is a corrected release, store it as a new version with --version NAME (human:{corpus}@NAME; "
           "the set stays as it is)")
    changed = [d for d in dialogues if stored.get(d["id"]) not in (None, "", d["sha256"])]
    if changed:
        shown = ", ".join(f"{d['where']}: id {d['id']!r}" for d in changed[:5])
        return (f"human:{corpus}: {len(changed)} conversation(s) of this file differ from the stored ones of the "
                f"same id ({shown}); nothing stored: {fix}")
    new = [d for d in dialogues if d["id"] not in stored]
    lacking = len(set(stored) - {d["id"] for d in dialogues})
    if new and lacking and not add_new:
        return (f"human:{corpus}: this file has {len(new)} conversation(s) the set lacks (first {new[0]['where']}) "
                f"and lacks {lacking} of the set's {len(stored)}; nothing stored: {fix}, or add its new "
                "conversations to the set with --add")
    return ""


def import_corpus(store: Any, text: str, fmt: str, corpus: str, keep_valid: bool = False, file_name: str = "",
                  version: str = "", add_new: bool = False, max_conversations: int = 0, bound: str = "",
                  progress: Optional[Progress] = None, check: Optional[Callable[[], None]] = None) -> HumanImport:
    """Store a corpus's dialogues as human dialogues of collection `corpus` (`corpus@version` with a version).
    All or nothing by default; with keep_valid the good ones are stored and each bad one named. Conversations
    already in the set are skipped and listed; a file that would put a corrected conversation beside its old
    one is refused (ValueError; see the module docstring). `progress` is called as the file is read and once
    before the rows are written; `check` between every PROGRESS_EVERY rows written, inside the one
    transaction (SQLite has one writer: it must not write the store). An exception either raises stops the
    import with nothing stored."""
    target = f"{corpus}@{check_name(version, '--version')}" if version else corpus
    report = HumanImport(corpus=target)
    dialogues, report.errors = read_corpus(text, fmt, corpus, max_conversations, bound, progress)
    seen: set[str] = set()
    unique = []
    for d in dialogues:
        if d["id"] in seen:
            report.errors.append(f"{d['where']}: id: {d['id']!r} appears twice in the file")
        else:
            seen.add(d["id"])
            unique.append(d)
    if report.errors and not keep_valid:
        return report
    with read_scope(store) as s:
        stored = {eid: (config or {}).get("sha256", "") for eid, config in
                  s.execute(select(Dialogue.external_id, Dialogue.config).where(Dialogue.source == "human",
                                                                               Dialogue.collection == target))}
    if problem := release_conflict(target, stored, unique, add_new):
        raise ValueError(problem)
    report.duplicates = [d["id"] for d in unique if d["id"] in stored]
    fresh = [d for d in unique if d["id"] not in stored]
    lineage = {"version": version, "version_of": corpus} if version else {}
    code = code_version()
    if progress:
        progress("storing", len(fresh))
    with session_scope(store) as s:  # one transaction: every dialogue or none
        for start in range(0, len(fresh), PROGRESS_EVERY):
            chunk = fresh[start:start + PROGRESS_EVERY]
            ids = list(s.scalars(insert(Dialogue).returning(Dialogue.id, sort_by_parameter_order=True),
                                 [dialogue_values(d, fmt, target, file_name, code, lineage) for d in chunk]))
            s.execute(insert(Turn), [turn for did, d in zip(ids, chunk) for turn in turn_values(did, d["turns"])])
            report.dialogue_ids += ids
            for d in chunk:
                report.turns += len(d["turns"])
                report.ratings += sum(len(t["scores"]) for t in d["turns"])
                report.rated_turns += sum(t["score"] is not None for t in d["turns"])
                report.state_pairs += d["state"] is not None
            if check:
                check()
    return report


def dialogue_values(d: dict[str, Any], fmt: str, collection: str, file_name: str, code: str,
                    lineage: dict[str, str]) -> dict[str, Any]:
    """The Dialogue row of a read conversation, as the values of an insert."""
    return dict(persona_id=None, persona_snapshot=d["profile"].to_dict(), source="human", collection=collection,
                external_id=d["id"], policy_ref=d["policy"] or f"people:{collection}", status="finished", outcome="imported",
                n_turns=sum(t["role"] == "assistant" for t in d["turns"]), code_version=code,
                config={"format": fmt, "corpus": collection, "file": file_name, "where": d["where"],
                        "score_scale": d["score_scale"], "state": d["state"], "groups": d["groups"],
                        "survey": d["survey"], "sha256": d["sha256"], **lineage})


def turn_values(dialogue_id: int, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Turn rows of a dialogue: the people's score (and every score of a merged turn), the supporter's
    strategies and how many messages were merged."""
    rows = []
    for i, t in enumerate(turns):
        inner: dict[str, Any] = {"score": t["score"]} if t["score"] is not None else {}
        if len(t["scores"]) > 1:
            inner["scores"] = t["scores"]
        if t["strategies"]:
            inner["strategy"] = t["strategies"]
        if t["messages"] > 1:
            inner["messages"] = t["messages"]
        rows.append({"dialogue_id": dialogue_id, "index": i, "role": t["role"], "text": t["text"], "inner": inner})
    return rows


def human_sets(store: Any) -> list[dict[str, Any]]:
    """The stored human corpora: name and number of dialogues."""
    from sqlalchemy import func

    query = (select(Dialogue.collection, func.count(Dialogue.id)).where(Dialogue.source == "human",
                                                                         Dialogue.collection != "")
             .group_by(Dialogue.collection).order_by(Dialogue.collection))
    with read_scope(store) as s:
        return [{"name": c, "n": n} for c, n in s.execute(query)]


def human_set_ids(store: Any, spec: str) -> list[int]:
    """The dialogue ids of `human:NAME`, oldest first; ValueError naming the problem."""
    kind, _, name = (spec or "").partition(":")
    if kind != "human" or not name.strip():
        raise ValueError(f"--set: {spec!r} is not a human set; write human:NAME (import one with import-human)")
    with read_scope(store) as s:
        ids = list(s.scalars(select(Dialogue.id).where(Dialogue.source == "human", Dialogue.collection == name.strip())
                             .order_by(Dialogue.id)))
    if not ids:
        known = ", ".join(f"human:{h['name']}" for h in human_sets(store)) or "none yet"
        raise ValueError(f"--set: {spec!r} names no stored human dialogues (stored: {known})")
    return ids
