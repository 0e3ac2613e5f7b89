"""The measures beside rank agreement in a human set's report (simulator.evaluation.people.measures), on a real
SQLite store with shadow judgements stored as a shadow run stores them: the calibration curve is the hand
computed mean at each score, a simulator whose next message is the person's beats the shuffled-pairs baseline
(real MiniLM) and one with no reply text says so, the survey's empathy and relevance are imported and ranked
against the dialogue totals, the per-turn interval narrows as more dialogues are rated, and the within-dialogue
Spearman sees a ranking of one person's replies that the pooled one hides behind who the person is."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from conftest import shared_data_dir

from app.agreement_plots import change_by_score_lines, policy_ranking_points
from simulator import __main__ as simulator_cli
from simulator.evaluation.human_agreement import format_human_report, human_agreement, load_set
from simulator.evaluation.human_corpora import import_corpus
from simulator.evaluation.people.measures import interval_by_dialogues, shuffled_partners, within_dialogue
from simulator.llm.embedding import embed_sync
from storage.ratings import add_shadow
from testkit.human_corpus import esconv_conversation

SAYINGS = ("My landlord raised the rent again and I cannot pay it.", "I failed the chemistry exam I studied for.",
           "My sister stopped talking to me after the wedding.", "The dog I had for twelve years died on Sunday.",
           "I keep waking at four in the morning and cannot sleep.", "My manager yelled at me in front of the team.",
           "Nobody came to my birthday dinner this year.", "The doctor wants more tests on my heart.",
           "I spent all my savings on a car that broke down.", "My son will not get out of bed for school.",
           "I moved to a new city and know no one here.", "My best friend is moving abroad next month.")


def people_dialogue(k: int, scores: list[int]) -> dict:
    """The lab's human JSONL: the person speaks one of SAYINGS after every reply and scores it."""
    turns = [{"role": "user", "text": SAYINGS[k % len(SAYINGS)]}]
    for i, score in enumerate(scores):
        turns += [{"role": "policy", "text": f"That sounds hard; tell me more ({k}.{i})."},
                  {"role": "user", "text": SAYINGS[(5 * k + i + 1) % len(SAYINGS)], "score": score}]
    return {"id": f"d{k}", "score_scale": [1, 5], "turns": turns,
            "state": {"pre": 4, "post": 2, "scale": [1, 5], "better": "lower"}}


def judge(store, set_spec: str, name: str, delta_of, reply_of=lambda d, i: "") -> str:
    """Store a shadow judgement for every user turn answering a reply, as a shadow run does; the fingerprint hash."""
    dialogues, _ = load_set(store, set_spec)
    for pos, d in enumerate(dialogues):
        roles = [role for _, role, _ in d["turns"]]
        for j, (index, role, _) in enumerate(d["turns"]):
            if role == "user" and j and roles[j - 1] == "assistant":
                add_shadow(store, dialogue_id=d["id"], turn_index=index, fingerprint={"model": name},
                           fingerprint_hash=name, delta=delta_of(pos, index), emotion=50.0,
                           reply_text=reply_of(d, index))
    return name


def test_the_curve_is_the_mean_change_at_each_score_and_the_plot_draws_it_beside_the_map(store):
    scores = [[1, 3, 5], [3, 3, 1], [5, 1, 3], [1, 5, 5]]
    import_corpus(store, "\n".join(json.dumps(people_dialogue(k, s)) for k, s in enumerate(scores)), "jsonl", "hand")
    deltas = [[-6, 0, 8], [2, -2, -4], [10, -8, 4], [-2, 6, 2]]  # dialogue k's change after reply i
    judge(store, "human:hand", "hand", lambda pos, index: deltas[pos][index // 2 - 1])
    report = human_agreement(store, "human:hand", n_boot=200, with_realism=False)
    curve = report["by_fingerprint"]["hand"]["change_by_score"]
    # by hand: score 1 <- -6, -4, -8, -2; score 3 <- 0, 2, -2, 4; score 5 <- 8, 10, 6, 2
    assert [(c["score"], c["n"], c["mean"], c["n_dialogues"]) for c in curve] == [
        (1.0, 4, -5.0, 4), (3.0, 4, 1.0, 3), (5.0, 4, 6.5, 3)]
    assert [c["mapped"] for c in curve] == [-10.0, 0.0, 10.0]  # (score - 3) x 5 points
    for c in curve:
        assert c["ci_low"] <= c["mean"] <= c["ci_high"] and c["ci_low"] < c["ci_high"]
    assert "1: -5.0 [" in format_human_report(report)
    fig = change_by_score_lines(report)
    assert [tr.name for tr in fig.data] == ["hand hand", "declared map"]  # hash and model
    assert list(fig.data[0].y) == [-5.0, 1.0, 6.5] and list(fig.data[1].y) == [-10.0, 0.0, 10.0]
    assert list(fig.data[0].error_y.array) == pytest.approx([c["ci_high"] - c["mean"] for c in curve])


def test_the_agreement_command_prints_the_measures_and_skips_realism_when_asked(store, db_url, capsys):
    """In-process (a test not marked model may not load MiniLM: --no-realism must keep it unloaded)."""
    rng = np.random.default_rng(6)
    import_corpus(store, "\n".join(json.dumps(people_dialogue(k, [int(v) for v in rng.integers(1, 6, 3)]))
                                   for k in range(30)), "jsonl", "cli")
    judge(store, "human:cli", "cli", lambda pos, index: float(pos % 7 - 3), lambda d, index: "I see.")
    argv = ["agreement", "--set", "human:cli", "--db", db_url, "--n-boot", "100", "--no-realism"]
    assert simulator_cli.main(argv + ["--json"]) == 0
    table = json.loads(capsys.readouterr().out)["by_fingerprint"]["cli"]
    assert "realism" not in table and [r["k"] for r in table["interval_by_dialogues"]] == [10, 20, 30]
    assert set(table["survey"]) == {"empathy", "relevance"} and table["survey"]["empathy"]["n"] == 0
    assert table["turns"]["within_spearman"]["n"] == 90 and table["turns"]["within_spearman"]["n_dialogues"] == 30
    assert simulator_cli.main(argv) == 0
    text = capsys.readouterr().out
    assert "per-turn spearman 95% interval width by dialogues rated: 10: " in text and "| 30: " in text
    assert "within a dialogue (changes and scores centred on their dialogue's mean): spearman " in text
    assert "no dialogue has the survey's empathy score" in text and "next message" not in text


def test_the_shuffled_partner_is_any_pair_of_another_dialogue():
    dialogue_of = np.array([0, 0, 0, 1, 2, 2, 5, 5, 5, 5])
    drawn = np.zeros((10, 10))
    for seed in range(2000):
        partners = shuffled_partners(dialogue_of, seed)
        drawn[np.arange(10), partners] += 1
    other = dialogue_of[:, None] != dialogue_of[None, :]
    assert (drawn[~other] == 0).all() and (drawn[other] > 0).all()
    assert shuffled_partners(np.array([3, 3]), 0) is None


@pytest.mark.model
def test_a_simulator_saying_what_the_person_said_beats_the_shuffled_baseline(store):
    rng = np.random.default_rng(1)
    import_corpus(store, "\n".join(json.dumps(people_dialogue(k, [int(v) for v in rng.integers(1, 6, 3)]))
                                   for k in range(12)), "jsonl", "echo")
    echo = judge(store, "human:echo", "echo", lambda pos, index: 1.0, lambda d, index: d["texts"][index])
    mute = judge(store, "human:echo", "mute", lambda pos, index: 1.0)
    report = human_agreement(store, "human:echo", n_boot=200, seed=4)
    said = report["by_fingerprint"][echo]["realism"]
    assert said["n"] == 36 and said["n_dialogues"] == 12 and said["why"] == ""
    assert said["real"]["value"] == pytest.approx(1.0, abs=1e-5)
    assert said["shuffled"]["value"] < 0.6 and said["difference"]["ci_low"] > 0.3
    # the baseline is the same messages paired with other dialogues' people, as the seed draws them
    dialogues, sims = load_set(store, "human:echo")
    pairs = sorted(sims[echo]["replies"].items())
    pos_of = {d["id"]: p for p, d in enumerate(dialogues)}
    dialogue_of = np.array([pos_of[did] for (did, _), _ in pairs])
    partners = shuffled_partners(dialogue_of, 4)
    assert (dialogue_of[partners] != dialogue_of).all()
    people = embed_sync([dialogues[pos_of[did]]["texts"][i] for (did, i), _ in pairs])
    said_vecs = embed_sync([text for _, text in pairs])
    assert said["shuffled"]["value"] == pytest.approx(float((said_vecs * people[partners]).sum(axis=1).mean()),
                                                      abs=1e-5)
    silent = report["by_fingerprint"][mute]["realism"]
    assert silent["n"] == 0 and silent["real"]["value"] is None and "reply text is empty" in silent["why"]
    assert "n 0 in 0 dialogue(s)" in format_human_report(report)


def test_the_survey_scores_are_imported_and_ranked_against_the_dialogue_totals(store):
    rng = np.random.default_rng(2)
    conversations = []
    for k in range(8):
        c = esconv_conversation(k, rng)
        c["survey_score"]["seeker"].update(empathy=str(k % 5 + 1), relevance=str(5 - k % 5))
        conversations.append(c)
    conversations[7]["survey_score"]["seeker"]["empathy"] = ""  # not answered: left out of empathy only
    import_corpus(store, json.dumps(conversations), "esconv", "survey")
    dialogues, _ = load_set(store, "human:survey")
    assert [d["survey"]["empathy"] for d in dialogues] == ["1", "2", "3", "4", "5", "1", "2", ""]
    # the simulator's total follows empathy: each reply of dialogue k changes by its empathy (+ k / 100)
    judge(store, "human:survey", "kind", lambda pos, index: (pos % 5 + 1) + pos / 100)
    survey = human_agreement(store, "human:survey", n_boot=200, with_realism=False)["by_fingerprint"]["kind"]["survey"]
    assert survey["empathy"]["n"] == 7 and survey["empathy"]["n_without"] == 1
    totals = [6 * ((pos % 5 + 1) + pos / 100) for pos in range(7)]  # six replies a dialogue
    assert survey["empathy"]["value"] == pytest.approx(stats.spearmanr(totals, [1, 2, 3, 4, 5, 1, 2]).statistic)
    assert survey["empathy"]["value"] > 0.9 and survey["empathy"]["ci_low"] > 0.5
    assert survey["relevance"]["n"] == 8 and survey["relevance"]["value"] < -0.9


@pytest.mark.data
def test_the_shared_esconv_survey_keeps_empathy_and_relevance(store):
    path = shared_data_dir() / "esconv" / "esconv-failed-136.json"
    if not path.is_file():
        pytest.skip(f"{path} not found (set RLVER_SHARED_DATA)")
    release = json.loads(path.read_text(encoding="utf-8"))
    import_corpus(store, path.read_text(encoding="utf-8"), "esconv", "esconv")
    dialogues, _ = load_set(store, "human:esconv")
    for key in ("empathy", "relevance"):
        given = sum(str((c.get("survey_score") or {}).get("seeker", {}).get(key) or "").strip() != "" for c in release)
        kept = sum(str(d["survey"].get(key) or "").strip() != "" for d in dialogues)
        assert kept == given > 0


def test_the_per_turn_interval_narrows_as_more_dialogues_are_rated():
    rng = np.random.default_rng(3)
    turns = []
    for pos in range(160):
        for score in rng.integers(1, 6, 4):
            turns.append({"dialogue": pos, "score": float(score), "sim": float(score + rng.normal(0, 2.5))})
    ladder = interval_by_dialogues(turns, n_boot=500, seed=0)
    assert [r["k"] for r in ladder] == [10, 20, 40, 80, 160]
    widths = [r["width"] for r in ladder]
    assert all(a > b for a, b in zip(widths, widths[1:])), widths
    assert widths[0] > 2 * widths[-1]


def test_within_a_dialogue_the_ranking_of_one_persons_replies_shows_where_pooling_hides_it():
    """Two simulators on 120 people who differ in how they rate everything (a level per person, 1-5) and rate
    their own conversation's replies by a quality q: one follows the people's level, not q (pooled Spearman high,
    within zero); the other follows q, against the level (pooled low, within high: the signal a reward needs)."""
    rng = np.random.default_rng(8)
    level_follower, quality_follower = [], []
    for pos in range(120):
        level = int(rng.integers(1, 4))
        for k, q in enumerate(rng.permutation(3)):
            score = float(level + q)
            level_follower.append({"dialogue": pos, "score": score, "sim": float(level + rng.normal(0, 0.1))})
            quality_follower.append({"dialogue": pos, "score": score, "sim": float(q - 3 * level)})
    lone = {"dialogue": 999, "score": 3.0, "sim": 0.0}  # a dialogue of one rated turn cannot be centred: left out
    follows_level = within_dialogue(level_follower + [lone], n_boot=300, seed=0)
    follows_quality = within_dialogue(quality_follower, n_boot=300, seed=0)
    assert follows_level["n"] == 360 and follows_level["n_dialogues"] == 120
    assert abs(follows_level["value"]) < 0.15 and follows_level["ci_low"] < 0 < follows_level["ci_high"]
    assert follows_quality["value"] == pytest.approx(1.0) and follows_quality["ci_low"] > 0.99
    pooled = [stats.spearmanr([u["sim"] for u in t], [u["score"] for u in t]).statistic
              for t in (level_follower, quality_follower)]
    assert pooled[0] > 0.6 and pooled[1] < 0.0


def test_the_ranking_of_policies_is_the_peoples_where_the_set_names_who_supported(store):
    """Four policies of known quality, five dialogues each (the JSONL's "policy"); the people score a better policy
    higher. A simulator whose change follows the quality ranks them as the people did (Spearman 1, every pair
    alike); one that follows it backwards ranks them the other way; a policy with one dialogue is left out and
    counted; a set without policies says why there is no ranking; a bad "policy" is refused naming the field."""
    rng = np.random.default_rng(3)
    quality = {"gentle-7b": 4, "plain-7b": 3, "curt-7b": 2, "rude-7b": 1}
    lines, k = [], 0
    for name, q in quality.items():
        for _ in range(5):
            d = people_dialogue(k, [int(np.clip(q + rng.integers(-1, 2), 1, 5)) for _ in range(3)])
            lines.append(json.dumps({**d, "policy": name}))
            k += 1
    lines.append(json.dumps({**people_dialogue(k, [5, 5, 5]), "policy": "lonely-1b"}))
    import_corpus(store, "\n".join(lines), "jsonl", "arena")
    dialogues, _ = load_set(store, "human:arena")
    policy_at = [d["policy"] for d in dialogues]
    assert policy_at.count("gentle-7b") == 5 and policy_at[-1] == "lonely-1b"
    judge(store, "human:arena", "follows", lambda pos, i: quality.get(policy_at[pos], 5) * 2.0 + rng.normal(0, 0.5))
    judge(store, "human:arena", "backwards", lambda pos, i: -quality.get(policy_at[pos], 5) * 2.0)
    report = human_agreement(store, "human:arena", n_boot=300, with_realism=False)
    follows = report["by_fingerprint"]["follows"]["policy_ranking"]
    backwards = report["by_fingerprint"]["backwards"]["policy_ranking"]
    assert follows["n_policies"] == 4 and follows["n_left_out"] == 1
    assert [p["policy"] for p in follows["policies"]] == sorted(quality)
    people_means = {p["policy"]: p["people_mean"] for p in follows["policies"]}
    assert sorted(people_means, key=people_means.get) == ["rude-7b", "curt-7b", "plain-7b", "gentle-7b"]
    assert all(p["n_dialogues"] == 5 and p["n_turns"] == 15 for p in follows["policies"])
    assert follows["spearman"]["value"] == pytest.approx(1.0) and follows["pairs_alike"]["value"] == 1.0
    assert follows["spearman"]["ci_low"] > 0.5 and follows["spearman"]["n"] == 4
    assert backwards["spearman"]["value"] == pytest.approx(-1.0) and backwards["pairs_alike"]["value"] == 0.0
    text = format_human_report(report)
    assert "ranking of 4 policies" in text and "1 with fewer than 2 dialogues left out" in text
    fig = policy_ranking_points(report)
    assert [tr.name.split(" ")[0] for tr in fig.data] == ["backwards", "follows"]
    assert list(fig.data[1].x) == [p["people_mean"] for p in follows["policies"]]
    assert list(fig.data[1].y) == [p["sim_mean"] for p in follows["policies"]]

    import_corpus(store, "\n".join(json.dumps(people_dialogue(k, [3, 4])) for k in range(4)), "jsonl", "anon")
    judge(store, "human:anon", "anon", lambda pos, i: 1.0)
    anon = human_agreement(store, "human:anon", n_boot=50, with_realism=False)["by_fingerprint"]["anon"]
    assert anon["policy_ranking"]["n_policies"] == 1 and anon["policy_ranking"]["spearman"]["value"] is None
    assert "a ranking needs two or more" in anon["policy_ranking"]["why"]
    empty = policy_ranking_points(human_agreement(store, "human:anon", n_boot=50, with_realism=False))
    assert not empty.data and "a ranking needs two or more" in empty.layout.annotations[0].text
    bad = import_corpus(store, json.dumps({**people_dialogue(0, [3]), "policy": ""}), "jsonl", "badpolicy")
    assert not bad.dialogue_ids and "policy: who supported the person" in bad.errors[0]


def test_names_from_an_uploaded_corpus_stay_inside_the_reports_code_block(store):
    """The People tab shows the report in a Markdown code block; a policy or group name (from a file a web visitor
    uploads) that closes the fence must not turn what follows into an image or a link (a request to anywhere)."""
    from markdown_it import MarkdownIt

    from app.render import fenced

    escape = "x\n```\n![t](http://127.0.0.1:9/leak) [l](http://127.0.0.1:9/)\n````"
    lines = [json.dumps({**people_dialogue(k, [k % 5 + 1, 3]), "policy": f"{escape} {k % 2}",
                         "persona": {"problem_type": escape}}) for k in range(6)]
    import_corpus(store, "\n".join(lines), "jsonl", "hostile")
    judge(store, "human:hostile", "h", lambda pos, i: float(pos))
    text = format_human_report(human_agreement(store, "human:hostile", n_boot=50, with_realism=False))
    assert "![t](http://127.0.0.1:9/leak)" in text  # the names are in the report as typed
    html = MarkdownIt("commonmark").render(fenced(text))
    assert "<img" not in html and "<a " not in html and html.count("<pre>") == 1
