"""What researchers comparing simulated users with people measure beside rank agreement, per simulator
fingerprint of a human set's agreement report (simulator.evaluation.human_agreement):

  within_dialogue        Spearman of the simulator's change against the person's score after each is centred on
                         its dialogue's mean (dialogues with two or more rated turns): how it ranks one
                         conversation's replies as that person did, which is what a reward compares between the
                         replies to one persona; the pooled per-turn Spearman also counts who the person is
  change_by_score        the calibration curve: the simulator's mean change at each of the people's turn scores
                         (simulator.fitting.monotone_map.change_by_score) with its 95% interval over dialogues,
                         beside the declared mapping (score - midpoint) x turn points
  realism                the simulator's next message (what it would have said: ShadowJudgement.reply_text)
                         against the person's real next message at that turn: MiniLM cosine (all-MiniLM-L6-v2,
                         simulator.llm.embedding), against a shuffled-pairs baseline (the same simulator messages
                         each paired, seeded, with a person's message from another dialogue); the mean of each
                         and the mean difference (real - shuffled), intervals over dialogues
  survey                 per dialogue, Spearman of the simulator's total change against the person's survey
                         scores (ESConv's survey_score.seeker empathy and relevance, 1-5; kept in the dialogue's
                         config.survey on import). A dialogue enters when its total is judged and it has the
                         pre/post state (ESConv's survey comes whole or not at all)
  interval_by_dialogues  how the per-turn Spearman's 95% interval narrows with the number of dialogues rated:
                         resamples of k dialogues (with replacement) for k on a short ladder and all of them
  policy_ranking         where the set's dialogues come from several policies or supporters (each dialogue's
                         policy_ref; the lab's JSONL names it per dialogue), whether the simulator ranks them as
                         the people did (SimulatorArena's question): per policy the people's mean turn score and
                         the simulator's mean change per rated turn, their Spearman across policies and the share
                         of policy pairs the simulator orders as the people do (pairs the people tie left out);
                         intervals resample each policy's dialogues on its own

Intervals resample whole dialogues (simulator.evaluation.agreement.bootstrap), seeded.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from simulator.evaluation.agreement import MIN_UNITS, bootstrap, centred, estimate, pair_reason, spearman
from simulator.fitting.monotone_map import change_by_score

LADDER = (10, 20, 40, 80)  # dialogues rated; the whole set is added
MIN_POLICY_DIALOGUES = 2  # a policy enters the ranking with this many dialogues holding judged rated turns
SURVEY_KEYS = ("empathy", "relevance")
EMBEDDING_MODEL = "all-MiniLM-L6-v2"


def dialogue_clusters(units: Sequence[dict[str, Any]]) -> list[np.ndarray]:
    """The unit indices of each dialogue (units carry their dialogue's position as "dialogue")."""
    by: dict[int, list[int]] = defaultdict(list)
    for i, u in enumerate(units):
        by[u["dialogue"]].append(i)
    return [np.array(v) for v in by.values()]


def within_dialogue(turns: Sequence[dict[str, Any]], n_boot: int, seed: int) -> dict[str, Any]:
    """Spearman of dialogue-centred simulator changes against dialogue-centred scores (module docstring)."""
    kept = [c for c in dialogue_clusters(turns) if len(c) >= 2]
    order = np.concatenate(kept) if kept else np.array([], dtype=int)
    dialogue_of = np.array([turns[int(i)]["dialogue"] for i in order])
    sim_c = centred(np.array([turns[int(i)]["sim"] for i in order]), dialogue_of)
    score_c = centred(np.array([turns[int(i)]["score"] for i in order]), dialogue_of)
    position = {int(i): k for k, i in enumerate(order)}
    clusters = [np.array([position[int(i)] for i in c]) for c in kept]
    rho = spearman(sim_c, score_c) if len(sim_c) >= MIN_UNITS else None
    boot = bootstrap(len(sim_c), lambda i: spearman(sim_c[i], score_c[i]), n_boot, seed, clusters=clusters)
    return {**estimate(rho, boot, len(sim_c), pair_reason("spearman", sim_c, score_c)), "n_dialogues": len(kept)}


def score_curve(turns: Sequence[dict[str, Any]], turn_points: float, n_boot: int, seed: int) -> list[dict[str, Any]]:
    """Per person's score: n, the simulator's mean change and its interval, the dialogues holding that score, and
    the declared mapping's change for it."""
    sim = np.array([u["sim"] for u in turns], dtype=float)
    score = np.array([u["score"] for u in turns], dtype=float)
    clusters = dialogue_clusters(turns)

    def mean_at(s: float):
        def statistic(i: np.ndarray) -> float | None:
            at = score[i] == s
            return float(np.mean(sim[i][at])) if at.any() else None
        return statistic

    out = []
    for key, cell in change_by_score(list(turns)).items():
        s = float(key)
        boot = bootstrap(len(turns), mean_at(s), n_boot, seed, clusters=clusters)
        at = [u for u in turns if u["score"] == s]
        out.append({"score": s, "n": cell["n"], "mean": cell["mean"], "ci_low": boot["ci_low"],
                    "ci_high": boot["ci_high"], "n_undefined": boot["n_undefined"],
                    "n_dialogues": len({u["dialogue"] for u in at}),
                    "mapped": float(np.mean([(s - u["mid"]) * turn_points for u in at]))})
    return out


def reply_pairs(dialogues: Sequence[dict[str, Any]], replies: dict[tuple, str]) -> list[tuple[int, str, str]]:
    """(dialogue position, what the simulator would have said, what the person said) per judged turn with both."""
    pos_of = {d["id"]: p for p, d in enumerate(dialogues)}
    out = []
    for (dialogue_id, index), said in sorted(replies.items()):
        pos = pos_of.get(dialogue_id)
        person = (dialogues[pos].get("texts") or {}).get(index, "") if pos is not None else ""
        if said.strip() and person.strip():
            out.append((pos, said, person))
    return out


def shuffled_partners(dialogue_of: np.ndarray, seed: int) -> np.ndarray | None:
    """For each pair, the index of a pair drawn uniformly from the other dialogues' (seeded); None when there is
    one dialogue. Linear: in dialogue order, a draw over the pairs outside one's own block skips the block."""
    if len(set(dialogue_of.tolist())) < 2:
        return None
    order = np.argsort(dialogue_of, kind="stable")
    ranked = dialogue_of[order]
    start, end = np.searchsorted(ranked, dialogue_of, "left"), np.searchsorted(ranked, dialogue_of, "right")
    draw = np.random.default_rng(seed).integers(0, len(dialogue_of) - (end - start))
    return order[np.where(draw < start, draw, draw + (end - start))]


def realism(dialogues: Sequence[dict[str, Any]], replies: dict[tuple, str], n_boot: int, seed: int) -> dict[str, Any]:
    """MiniLM cosine of the simulator's next message to the person's, against shuffled pairs."""
    pairs = reply_pairs(dialogues, replies)
    out: dict[str, Any] = {"n": len(pairs), "n_dialogues": len({p[0] for p in pairs}), "model": EMBEDDING_MODEL,
                           "seed": seed, "why": ""}
    empty = estimate(None, bootstrap(0, lambda i: None, n_boot, seed), 0)
    if not pairs:
        out["why"] = ("none of this simulator's judgements holds the message it would have said (its reply text is "
                      "empty), or the people's messages at those turns are empty")
        return {**out, "real": empty, "shuffled": empty, "difference": empty}
    from simulator.llm.embedding import embed_sync

    dialogue_of = np.array([p[0] for p in pairs])
    sim_vecs = embed_sync([p[1] for p in pairs])
    people_vecs = embed_sync([p[2] for p in pairs])
    real = (sim_vecs * people_vecs).sum(axis=1).astype(float)
    clusters = dialogue_clusters([{"dialogue": int(d)} for d in dialogue_of])

    def mean_of(values: np.ndarray, why: str = "") -> dict[str, Any]:
        return estimate(float(np.mean(values)), bootstrap(len(values), lambda i: float(np.mean(values[i])), n_boot,
                                                          seed, clusters=clusters), len(values), why)

    out["real"] = mean_of(real)
    partners = shuffled_partners(dialogue_of, seed)
    if partners is None:
        out["why"] = "one dialogue: no other dialogue's message to pair with for the shuffled baseline"
        return {**out, "shuffled": empty, "difference": empty}
    shuffled = (sim_vecs * people_vecs[partners]).sum(axis=1).astype(float)
    return {**out, "shuffled": mean_of(shuffled), "difference": mean_of(real - shuffled)}


def survey_number(survey: dict[str, Any], key: str) -> float | None:
    """A survey score as a number (ESConv writes them as strings), None when missing or not a number."""
    try:
        value = float(str(survey.get(key, "")).strip())
    except ValueError:
        return None
    return value if np.isfinite(value) else None


def survey_agreement(whole: Sequence[dict[str, Any]], n_boot: int, seed: int) -> dict[str, Any]:
    """Per survey key: Spearman of the simulator's dialogue total against the person's survey score."""
    out = {}
    for key in SURVEY_KEYS:
        kept = [(u["sim"], survey_number(u.get("survey") or {}, key)) for u in whole]
        kept = [(s, v) for s, v in kept if v is not None]
        sim = np.array([s for s, _ in kept], dtype=float)
        people = np.array([v for _, v in kept], dtype=float)
        rho = spearman(sim, people) if len(sim) >= MIN_UNITS else None
        why = pair_reason("spearman", sim, people) if kept else f"no dialogue has the survey's {key} score"
        out[key] = {**estimate(rho, bootstrap(len(sim), lambda i: spearman(sim[i], people[i]), n_boot, seed),
                               len(sim), why), "n_without": len(whole) - len(kept)}
    return out


def interval_by_dialogues(turns: Sequence[dict[str, Any]], n_boot: int, seed: int,
                          ladder: Sequence[int] = LADDER) -> list[dict[str, Any]]:
    """The per-turn Spearman's 95% interval when k dialogues are rated, for k on the ladder (below the set's
    number of dialogues) and the whole set."""
    sim = np.array([u["sim"] for u in turns], dtype=float)
    score = np.array([u["score"] for u in turns], dtype=float)
    clusters = dialogue_clusters(turns)
    out = []
    for k in [k for k in ladder if k < len(clusters)] + ([len(clusters)] if clusters else []):
        boot = bootstrap(len(sim), lambda i: spearman(sim[i], score[i]), n_boot, seed, clusters=clusters, draws=k)
        width = None if boot["ci_low"] is None else boot["ci_high"] - boot["ci_low"]
        out.append({"k": k, "ci_low": boot["ci_low"], "ci_high": boot["ci_high"], "width": width,
                    "n_undefined": boot["n_undefined"], "why": boot["ci_why"]})
    return out


def ordered_alike(sim: np.ndarray, people: np.ndarray) -> float | None:
    """The share of pairs the people do not tie that the simulator orders the same way (None without such a pair)."""
    i, j = np.triu_indices(len(people), k=1)
    told = np.sign(people[i] - people[j])
    kept = told != 0
    return float(np.mean(np.sign(sim[i] - sim[j])[kept] == told[kept])) if kept.any() else None


def policy_ranking(dialogues: Sequence[dict[str, Any]], turns: Sequence[dict[str, Any]], n_boot: int,
                   seed: int) -> dict[str, Any]:
    """The simulator's ranking of the set's policies against the people's (module docstring)."""
    clusters = dialogue_clusters(turns)
    by: dict[str, list[np.ndarray]] = defaultdict(list)
    for c in clusters:
        by[dialogues[turns[int(c[0])]["dialogue"]].get("policy") or ""].append(c)
    names = sorted(p for p, cs in by.items() if len(cs) >= MIN_POLICY_DIALOGUES)
    kept = [c for p in names for c in by[p]]
    strata, start = [], 0
    for p in names:
        strata.append(list(range(start, start + len(by[p]))))
        start += len(by[p])
    sim = np.array([u["sim"] for u in turns], dtype=float)
    score = np.array([u["score"] for u in turns], dtype=float)
    which = np.full(len(turns), -1)
    for k, p in enumerate(names):
        for c in by[p]:
            which[c] = k

    def means(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = [idx[which[idx] == k] for k in range(len(names))]
        return np.array([score[a].mean() for a in at]), np.array([sim[a].mean() for a in at])

    def rho(idx: np.ndarray) -> float | None:
        people, simulated = means(idx)
        return spearman(simulated, people)

    def alike(idx: np.ndarray) -> float | None:
        people, simulated = means(idx)
        return ordered_alike(simulated, people)

    out: dict[str, Any] = {"n_policies": len(names), "n_left_out": len(by) - len(names), "policies": [], "why": ""}
    every = np.concatenate(kept) if kept else np.array([], dtype=int)
    if len(names) < 2:
        out["why"] = (f"the judged rated turns come from {len(names)} polic{'y' if len(names) == 1 else 'ies'} with "
                      f"{MIN_POLICY_DIALOGUES} or more dialogues: a ranking needs two or more (the lab's JSONL names "
                      "each dialogue's \"policy\")")
        nothing = estimate(None, bootstrap(0, lambda i: None, n_boot, seed), len(names), out["why"])
        return {**out, "spearman": nothing, "pairs_alike": nothing}
    people, simulated = means(every)
    out["policies"] = [{"policy": p, "n_dialogues": len(by[p]), "n_turns": int(sum(len(c) for c in by[p])),
                        "people_mean": float(people[k]), "sim_mean": float(simulated[k])} for k, p in enumerate(names)]
    boot = {f: bootstrap(len(every), f, n_boot, seed, clusters=kept, strata=strata) for f in (rho, alike)}
    rho_why = pair_reason("spearman", simulated, people) if len(names) >= MIN_UNITS else \
        f"{len(names)} policies, fewer than {MIN_UNITS} to rank"
    out["spearman"] = estimate(rho(every), boot[rho], len(names), rho_why)
    out["pairs_alike"] = estimate(alike(every), boot[alike], len(names), "the people's means tie for every pair")
    return out


def people_measures(dialogues: Sequence[dict[str, Any]], entry: dict[str, Any], units: dict[str, Any],
                    turn_points: float, n_boot: int, seed: int, with_realism: bool = True) -> dict[str, Any]:
    """The four measures of one simulator (`entry` from human_agreement.load_set, `units` from its units_of)."""
    out = {"change_by_score": score_curve(units["turns"], turn_points, n_boot, seed),
           "survey": survey_agreement(units["dialogues"], n_boot, seed),
           "interval_by_dialogues": interval_by_dialogues(units["turns"], n_boot, seed),
           "policy_ranking": policy_ranking(dialogues, units["turns"], n_boot, seed)}
    if with_realism:
        out["realism"] = realism(dialogues, entry.get("replies") or {}, n_boot, seed)
    return out


def _ci(e: dict[str, Any], fmt: str = "+.3f") -> str:
    if e.get("value", e.get("mean")) is None:
        return "-"
    value = e.get("value", e.get("mean"))
    return f"{value:{fmt}}" + ("" if e["ci_low"] is None else f" [{e['ci_low']:{fmt}}, {e['ci_high']:{fmt}}]")


def format_people_measures(t: dict[str, Any]) -> list[str]:
    """The measures of one simulator's table as text lines."""
    w = t["turns"]["within_spearman"]
    lines = [f"within a dialogue (changes and scores centred on their dialogue's mean): spearman {_ci(w)} "
             f"(n {w['n']} in {w['n_dialogues']} dialogue(s){', ' + w['why'] if w['why'] else ''})"]
    lines += ["mean simulator change at each person's score [95% interval] (declared map; n turns): " + "; ".join(
        f"{c['score']:g}: {_ci(c, '+.1f')} ({c['mapped']:+.1f}; n {c['n']})" for c in t["change_by_score"])]
    if "realism" in t:
        r = t["realism"]
        lines.append(f"next message vs the person's (MiniLM cosine, n {r['n']} in {r['n_dialogues']} dialogue(s)): "
                     f"real pairs {_ci(r['real'])}, shuffled pairs {_ci(r['shuffled'])}, difference "
                     f"{_ci(r['difference'])}" + (f"; {r['why']}" if r["why"] else ""))
    lines.append("dialogue total vs survey: " + "; ".join(
        f"{k} spearman {_ci(e)} (n {e['n']}{', ' + e['why'] if e['why'] else ''})" for k, e in t["survey"].items()))
    r = t["policy_ranking"]
    if r["n_policies"] < 2:
        lines.append(f"ranking of policies: - ({r['why']})")
    else:
        shown = "; ".join(f"{p['policy'][:40]} {p['people_mean']:.2f} / {p['sim_mean']:+.2f} (n {p['n_dialogues']})"
                          for p in r["policies"][:12])
        why = f" ({r['spearman']['why']})" if r["spearman"]["why"] else ""
        lines.append(f"ranking of {r['n_policies']} policies (people's mean score / simulator's mean change per rated "
                     f"turn): spearman {_ci(r['spearman'])}{why}, "
                     f"pairs ordered alike {_ci(r['pairs_alike'], '.2f')}; {shown}"
                     + (f"; {len(r['policies']) - 12} more" if len(r["policies"]) > 12 else "")
                     + (f"; {r['n_left_out']} with fewer than {MIN_POLICY_DIALOGUES} dialogues left out"
                        if r["n_left_out"] else ""))
    ladder = t["interval_by_dialogues"]
    lines.append("per-turn spearman 95% interval width by dialogues rated: " + " | ".join(
        f"{r['k']}: {'-' if r['width'] is None else format(r['width'], '.2f')}" for r in ladder))
    return lines
