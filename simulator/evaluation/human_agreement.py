"""Agreement of a simulated user with published people: its shadow judgements of a human set (human:NAME)
against the ratings the people gave in those same dialogues. One table per simulator fingerprint, so two
simulators are compared on the same people.

  turns      per rated user turn: the simulator's change since the previous rated turn of the dialogue (the sum
             of its judged changes over the replies in between) against the person's score. Spearman (rank:
             the scales need not match); with the declared mapping, the mean difference (simulator - people)
             in emotion points, the score taken as (score - scale midpoint) x turn_points_per_step
  dialogues  per dialogue: the simulator's total change against the person's pre-to-post change (intensity
             falling counts as getting better when the corpus says "lower" is better); Spearman, and the mean
             difference with the change mapped at state_points_per_step
  by_problem_type / by_emotion_type   the same, per group of the corpus

Intervals resample whole dialogues (turns within a dialogue are not independent). A turn whose span has a
reply the simulator did not judge (missing or an error) is left out and counted in n_unjudged.

Beside the tables, each simulator's calibration curve (change at each score), the realism of its next messages,
its totals against the people's survey scores and the per-turn interval's width by dialogues rated
(simulator.evaluation.people.measures).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import select

from simulator.evaluation.agreement import MIN_UNITS, N_BOOT, bootstrap, estimate, pair_reason, spearman
from simulator.evaluation.human_corpora import GROUP_KEYS, human_set_ids
from simulator.evaluation.people.measures import (dialogue_clusters, format_people_measures, people_measures,
                                                  within_dialogue)
from simulator.llm.hashing import fingerprint_hash
from simulator.personas.profile import Profile
from simulator.user.spec import SimulatorSpec
from storage import Dialogue, read_scope
from storage.ratings import ShadowJudgement

TURN_POINTS_PER_STEP = 5.0  # a 1-5 score step as emotion points of one reply: 1..5 -> -10..+10 (the Sentient clamp)
STATE_POINTS_PER_STEP = 25.0  # a 1-5 intensity step as emotion points: the whole 0-100 range over the 4 steps


def load_set(store: Any, set_spec: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(the set's dialogues with their turns' scores and the people's texts, {fingerprint hash: {"fingerprint",
    "deltas": {(dialogue, turn): delta or None}, "replies": {(dialogue, turn): what the simulator would have
    said}, "errors": [why a judgement failed]}})."""
    ids = human_set_ids(store, set_spec)
    dialogues, sims = [], {}
    with read_scope(store) as s:
        for d in s.scalars(select(Dialogue).where(Dialogue.id.in_(ids)).order_by(Dialogue.id)):
            config = dict(d.config or {})
            dialogues.append({"id": d.id, "external_id": d.external_id, "policy": d.policy_ref,
                              "state": config.get("state"),
                              "score_scale": config.get("score_scale"), "groups": config.get("groups") or {},
                              "survey": config.get("survey") or {},
                              "turns": [(t.index, t.role, (t.inner or {}).get("score")) for t in d.turns],
                              "texts": {t.index: t.text for t in d.turns if t.role == "user"}})
        for sh in s.scalars(select(ShadowJudgement).where(ShadowJudgement.dialogue_id.in_(ids))):
            entry = sims.setdefault(sh.fingerprint_hash, {"fingerprint": dict(sh.fingerprint or {}), "deltas": {},
                                                          "replies": {}, "errors": []})
            entry["deltas"][sh.dialogue_id, sh.turn_index] = None if sh.error else sh.delta
            if sh.reply_text and not sh.error:
                entry["replies"][sh.dialogue_id, sh.turn_index] = sh.reply_text
            if sh.error:
                entry["errors"].append(sh.error)
    return dialogues, sims


def replies_at(store: Any, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], tuple[list[str], str]]:
    """For each (dialogue id, index of a user turn answering a reply): what the user had said before the reply
    (their messages, in order) and the reply (the turn before that index)."""
    turns: dict[int, list[tuple[int, str, str]]] = {}
    with read_scope(store) as s:
        for d in s.scalars(select(Dialogue).where(Dialogue.id.in_(sorted({d for d, _ in keys})))):
            turns[d.id] = [(t.index, t.role, t.text or "") for t in d.turns]
    out = {}
    for d_id, index in keys:
        before = [t for t in turns[d_id] if t[0] < index]
        reply_at, reply = before[-1][0], before[-1][2]
        out[d_id, index] = ([text for i, role, text in before if role == "user" and i < reply_at], reply)
    return out


def people_change(state: dict[str, Any] | None) -> float | None:
    """The person's pre-to-post change in scale steps, positive when they got better."""
    if not state:
        return None
    change = float(state["post"]) - float(state["pre"])
    return -change if state.get("better") == "lower" else change


def units_of(dialogues: Sequence[dict[str, Any]], deltas: dict[tuple, float | None]) -> dict[str, Any]:
    """Per-turn units (dialogue position, score, simulator change, its per-reply parts, score midpoint) and
    per-dialogue units (simulator total and its parts, people's change) of one simulator."""
    turns, whole, unjudged = [], [], 0
    for pos, d in enumerate(dialogues):
        span: list[float | None] = []
        total: list[float | None] = []
        span_keys: list[tuple[int, int]] = []  # (dialogue id, the user turn answering each reply)
        total_keys: list[tuple[int, int]] = []
        previous_role = None
        lo, hi = (d["score_scale"] or [1, 5])
        for index, role, score in d["turns"]:
            if role == "user" and previous_role == "assistant":
                value = deltas.get((d["id"], index))
                span.append(value)
                total.append(value)
                span_keys.append((d["id"], index))
                total_keys.append((d["id"], index))
            previous_role = role
            if role == "user" and score is not None:
                if span and all(v is not None for v in span):
                    turns.append({"dialogue": pos, "score": float(score), "sim": float(sum(span)),
                                  "parts": [float(v) for v in span], "keys": span_keys, "mid": (lo + hi) / 2,
                                  "groups": d["groups"]})
                elif span:
                    unjudged += 1
                span, span_keys = [], []
        change = people_change(d["state"])
        if change is not None and total and all(v is not None for v in total):
            whole.append({"dialogue": pos, "people": change, "sim": float(sum(total)),
                          "parts": [float(v) for v in total], "keys": total_keys, "groups": d["groups"],
                          "survey": d.get("survey") or {}})
    return {"turns": turns, "dialogues": whole, "n_unjudged": unjudged}


def _table(units: Sequence[dict[str, Any]], people_key: str, mapped: np.ndarray, n_boot: int,
           seed: int) -> dict[str, Any]:
    """Spearman and the mapped mean difference (simulator - people) with dialogue-resampled intervals."""
    sim = np.array([u["sim"] for u in units], dtype=float)
    people = np.array([u[people_key] for u in units], dtype=float)
    clusters = dialogue_clusters(units)
    rho = spearman(sim, people) if len(sim) >= MIN_UNITS else None
    out = {"spearman": estimate(rho, bootstrap(len(sim), lambda i: spearman(sim[i], people[i]), n_boot, seed,
                                               clusters=clusters), len(sim),
                                pair_reason("spearman", sim, people))}
    diff = float(np.mean(sim - mapped)) if len(sim) else None
    out["mean_diff"] = estimate(diff, bootstrap(len(sim), lambda i: float(np.mean(sim[i] - mapped[i])), n_boot,
                                                seed, clusters=clusters), len(sim),
                                "no rated unit has a simulator value")
    out["n_dialogues"] = len(clusters)
    return out


def tables(units: dict[str, Any], n_boot: int, seed: int, turn_points: float, state_points: float) -> dict[str, Any]:
    t, d = units["turns"], units["dialogues"]
    turn_mapped = np.array([(u["score"] - u["mid"]) * turn_points for u in t], dtype=float)
    whole_mapped = np.array([u["people"] * state_points for u in d], dtype=float)
    return {"turns": {**_table(t, "score", turn_mapped, n_boot, seed),
                      "within_spearman": within_dialogue(t, n_boot, seed)},
            "dialogues": _table(d, "people", whole_mapped, n_boot, seed)}


def human_agreement(store: Any, set_spec: str, n_boot: int = N_BOOT, seed: int = 0, fingerprint: str = "",
                    turn_points_per_step: float = TURN_POINTS_PER_STEP,
                    state_points_per_step: float = STATE_POINTS_PER_STEP, with_realism: bool = True) -> dict[str, Any]:
    """The report: per simulator fingerprint (those starting with `fingerprint`), its turn and dialogue tables
    overall and per problem and emotion type, and simulator.evaluation.people.measures' measures (the realism of
    its next messages only with_realism: it embeds them). ValueError when no simulator has judged the set."""
    dialogues, sims = load_set(store, set_spec)
    chosen = {h: v for h, v in sims.items() if h.startswith(fingerprint or "")}
    if not chosen:
        raise ValueError(f"agreement: no simulator has judged {set_spec}"
                         + (f" under a fingerprint starting {fingerprint!r}" if fingerprint else "")
                         + f"; run python -m trainer shadow --set {set_spec} --simulator SPEC first")
    report: dict[str, Any] = {"set": set_spec, "n_dialogues": len(dialogues),
                              "n_scores": sum(1 for d in dialogues for t in d["turns"] if t[2] is not None),
                              "n_states": sum(1 for d in dialogues if d["state"]),
                              "mapping": {"turn_points_per_step": turn_points_per_step,
                                          "state_points_per_step": state_points_per_step},
                              "by_fingerprint": {}}
    for fp_hash, entry in sorted(chosen.items()):
        units = units_of(dialogues, entry["deltas"])
        table = {"fingerprint": entry["fingerprint"], "n_judged": sum(v is not None for v in entry["deltas"].values()),
                 "n_unjudged": units["n_unjudged"], "n_errors": len(entry["errors"]),
                 "first_error": entry["errors"][0][:300] if entry["errors"] else "",
                 **tables(units, n_boot, seed, turn_points_per_step, state_points_per_step),
                 **people_measures(dialogues, entry, units, turn_points_per_step, n_boot, seed, with_realism)}
        for key in GROUP_KEYS:
            names = sorted({u["groups"].get(key) or "-" for u in units["turns"] + units["dialogues"]})
            table[f"by_{key}"] = {
                name: tables({"turns": [u for u in units["turns"] if (u["groups"].get(key) or "-") == name],
                              "dialogues": [u for u in units["dialogues"] if (u["groups"].get(key) or "-") == name]},
                             n_boot, seed, turn_points_per_step, state_points_per_step) for name in names}
        report["by_fingerprint"][fp_hash] = table
    return report


def format_human_report(report: dict[str, Any]) -> str:
    """The report as text: one table per simulator fingerprint, a line per group."""
    def cell(e: dict[str, Any]) -> str:
        if e["value"] is None:
            return f"{'-':<24}"
        ci = "" if e["ci_low"] is None else f" [{e['ci_low']:.2f}, {e['ci_high']:.2f}]"
        return f"{e['value']:.2f}{ci}{'*' + str(e['n_undefined']) if e['n_undefined'] else ''}".ljust(24)

    m = report["mapping"]
    lines = [f"{report['set']}: {report['n_dialogues']} dialogue(s), {report['n_scores']} people's score(s), "
             f"{report['n_states']} pre/post state(s); mapping {m['turn_points_per_step']:g} points a score step "
             f"(turns), {m['state_points_per_step']:g} a state step (dialogues); 95% intervals over dialogues"]
    for fp_hash, t in report["by_fingerprint"].items():
        fp = t["fingerprint"]
        lines += ["", f"simulator {fp_hash} ({fp.get('backend', '')} {fp.get('model', '')}): {t['n_judged']} "
                      f"judged turn(s), {t['n_errors']} failed, {t['n_unjudged']} rated turn(s) left out (a reply "
                      "not judged)" + (f"; first failure: {t['first_error']}" if t["first_error"] else ""),
                  f"{'group':<30}{'n':>5}  {'turn spearman':<24}{'turn sim - people':<24}{'n':>5}  "
                  f"{'dialogue spearman':<24}dialogue sim - people"]
        rows = [("all", t)] + [(f"{k.split('_')[0]}={n[:22]}", g) for k in GROUP_KEYS
                               for n, g in t[f"by_{k}"].items()]
        for label, g in rows:
            lines.append(f"{label:<30}{g['turns']['spearman']['n']:>5}  {cell(g['turns']['spearman'])}"
                         f"{cell(g['turns']['mean_diff'])}{g['dialogues']['spearman']['n']:>5}  "
                         f"{cell(g['dialogues']['spearman'])}{cell(g['dialogues']['mean_diff'])}")
        lines += format_people_measures(t)
    return "\n".join(lines)


def set_fingerprint(store: Any, spec: SimulatorSpec, set_spec: str, seed: int = 0) -> tuple[dict[str, Any], str]:
    """(fingerprint, its hash) of the simulated user `spec` builds for the dialogues of `set_spec` (human:NAME):
    the key its shadow judgements of the set are stored under (trainer.benchmarking.shadow_jobs) and a
    calibration is fitted on. A simulated user's fingerprint names its model, prompts and rules, not the
    persona or the seed, so the one built for the set's first dialogue stands for all of them. ValueError
    naming the option: --simulator for a bad or unbuildable spec, --set for a set not stored."""
    if problems := spec.errors():
        field, message = next(iter(problems.items()))
        raise ValueError(f"--simulator: {field}: {message}")
    ids = human_set_ids(store, set_spec)
    try:
        factory = spec.factory()
    except (ValueError, RuntimeError, ImportError, OSError) as exc:
        raise ValueError(f"--simulator: {exc}") from None
    with read_scope(store) as s:
        persona = dict(s.get(Dialogue, ids[0]).persona_snapshot or {})
    fp = factory(Profile.from_dict(persona), seed).fingerprint()
    return fp, fingerprint_hash(fp)
