"""Paired evaluation of two policies (trainer/benchmarking/compare.py, `python -m trainer compare`)."""
from __future__ import annotations

import json

import pytest
from conftest import REPO
from helpers import off_loop, run_in_process

from trainer.benchmarking import compare, compare_runs
from trainer.benchmarking.benchmark import BenchmarkInputError


def _turns(*pairs):
    """Turn dicts from (reply, emotion) pairs after an opening at 40."""
    out = [{"role": "user", "text": "opening", "emotion": 40.0}]
    for reply, emotion in pairs:
        out.append({"role": "assistant", "text": reply})
        if emotion is not None:
            out.append({"role": "user", "text": f"after {reply}", "emotion": emotion})
    return out


def test_alignment_finds_the_first_differing_reply_and_emotion():
    a = compare.policy_turns(_turns(("hi", 45.0), ("I hear you", 50.0), ("go on", 55.0)))
    b = compare.policy_turns(_turns(("hi", 45.0), ("I hear you", 45.0), ("go on", 40.0)))
    assert [t["n"] for t in a] == [0, 1, 2, 3] and a[2]["reply"] == "I hear you" and a[2]["emotion"] == 50.0
    assert compare.first_difference(a, b, "reply") is None
    assert compare.first_difference(a, b, "emotion") == 2
    shorter = compare.policy_turns(_turns(("hi", 45.0), ("I hear you", None)))  # ended before the user answered
    assert compare.first_difference(a, shorter, "reply") == 3
    assert compare.first_difference(a, shorter, "emotion") == 2
    assert compare.first_difference(a, a, "emotion") is None


def test_paired_summary_counts_and_interval():
    s = compare.paired_summary([10.0, 5.0, 0.0, -5.0, 20.0], seed=3)
    assert (s["wins"], s["ties"], s["losses"], s["n"]) == (3, 1, 1, 5)
    assert s["mean_diff"] == pytest.approx(6.0)
    assert s["ci_low"] <= 6.0 <= s["ci_high"] and s["ci_low"] < s["ci_high"]
    assert s == compare.paired_summary([10.0, 5.0, 0.0, -5.0, 20.0], seed=3)  # seeded
    assert compare.paired_summary([0.0] * 8) == {"n": 8, "wins": 0, "ties": 8, "losses": 0, "mean_diff": 0.0,
                                              "ci_low": 0.0, "ci_high": 0.0, "sign_test_p": 1.0}


def test_sign_test_is_the_exact_binomial():
    assert compare.sign_test_p(0, 0) == 1.0
    assert compare.sign_test_p(8, 0) == pytest.approx(2 / 256)  # two-sided: 2 * 0.5^8
    assert compare.sign_test_p(5, 3) == pytest.approx(2 * (1 + 8 + 28 + 56) / 256)
    assert compare.sign_test_p(3, 5) == compare.sign_test_p(5, 3)


def test_breakdown_groups_by_a_persona_field():
    pairs = [{"need_category": "just_listen", "diff": 5.0}, {"need_category": "just_listen", "diff": -5.0},
             {"need_category": "useful_advice", "diff": 10.0}, {"need_category": "useful_advice", "diff": None}]
    by_need = compare.breakdown(pairs, "need_category")
    assert by_need["just_listen"]["ties"] == 0 and by_need["just_listen"]["mean_diff"] == 0.0
    assert by_need["useful_advice"]["n"] == 1 and by_need["useful_advice"]["wins"] == 1


def test_bad_input_names_the_field():
    with pytest.raises(BenchmarkInputError, match="seeds: must be an integer >= 1"):
        compare.CompareConfig(seeds=0).validate()
    with pytest.raises(BenchmarkInputError, match="b: openai:MODEL needs a model name"):
        compare.CompareConfig(b="openai:").validate()


@pytest.mark.model
def test_a_policy_compared_with_itself_ties_everywhere(store, tiny_model_dir):
    """A deterministic simulated user (offline) and the same policy: identical dialogues, every pair a tie."""
    config = compare.CompareConfig(a=str(tiny_model_dir), b=str(tiny_model_dir), profiles="builtin:heldout", limit=3,
                                   max_new_tokens=12, seeds=2)
    cid = compare_runs.run_comparison(store, config, log=lambda _m: None)
    pairs = compare.comparison_pairs(store, cid, with_turns=True)
    assert len(pairs) == 6 and {p["seed"] for p in pairs} == {0, 1}
    for p in pairs:
        assert p["a_dialogue_id"] != p["b_dialogue_id"]  # two ordinary dialogues ...
        assert [(t["role"], t["text"], t["emotion"]) for t in p["a_turns"]] == \
            [(t["role"], t["text"], t["emotion"]) for t in p["b_turns"]]  # ... played identically
        assert p["first_reply_diff_turn"] is None and p["first_emotion_diff_turn"] is None
    stored = compare.get_comparison(store, cid)
    assert stored["status"] == "succeeded" and len(stored["eval_runs"]["a"]) == 2
    assert (stored["summary"]["wins"], stored["summary"]["ties"], stored["summary"]["losses"]) == (0, 6, 0)


@pytest.mark.model
def test_compare_cli_json(tiny_model_dir, tmp_path):
    other = tmp_path / "other"
    from testkit.tiny_model import build_tiny_model

    build_tiny_model(other, seed=7)  # another policy: its replies differ from the first one's
    r = run_in_process("trainer", "compare", "--a", str(tiny_model_dir), "--b", str(other), "--profiles",
                       "builtin:heldout", "--limit", "2", "--max-new-tokens", "12",
                       "--db", f"sqlite:///{tmp_path / 'lab.db'}", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    personas, summary = lines[:-1], lines[-1]
    assert len(personas) == 2
    assert set(personas[0]) == {"persona", "seed", "a_final", "b_final", "first_reply_diff_turn",
                                "first_emotion_diff_turn"}
    assert all(p["first_reply_diff_turn"] == 1 for p in personas)  # different weights: the first reply differs
    assert {"wins", "ties", "losses", "mean_diff", "ci_low", "ci_high", "comparison_id"} <= set(summary)
    assert summary["wins"] + summary["ties"] + summary["losses"] == 2


def _trained_checkpoint(tiny_model_dir, tmp_path) -> str:
    """One PPO step of the tiny model (configs/tiny-test.yaml): a checkpoint folder, as training writes it."""
    from helpers import tiny_train_config

    config = tiny_train_config(tmp_path, tiny_model_dir, steps=1, actor_lr=0.05)
    r = run_in_process("trainer", "train", "--config", str(config), "--db", f"sqlite:///{tmp_path / 'train.db'}",
                       "--json", env={"RLVER_LAB_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])["checkpoint"]


@pytest.mark.slow
@pytest.mark.process
@pytest.mark.browser
def test_the_compare_view_shows_the_pairs_aligned(lab_server, browser_page, grid_rows, tiny_model_dir, tmp_path):
    """The untrained tiny policy against its checkpoint after one step: the view lists the pairs, and a pair
    opens both dialogues side by side, turn by turn, with both emotion curves."""
    from concurrent.futures import ThreadPoolExecutor

    from helpers import wait_for

    checkpoint = _trained_checkpoint(tiny_model_dir, tmp_path)
    config = compare.CompareConfig(a=str(tiny_model_dir), b=checkpoint, profiles="builtin:heldout", limit=2,
                                   max_new_tokens=12, name="untrained vs step 1")
    with ThreadPoolExecutor(1) as pool:  # sync Playwright keeps an event loop in this thread
        cid = pool.submit(compare_runs.run_comparison, lab_server.store, config, lambda _m: None).result()
    pairs = compare.comparison_pairs(lab_server.store, cid)
    page = browser_page
    page.get_by_role("tab", name="Compare").click()
    page.locator("#cmp-refresh").click()
    from app.services.compare import comparison_choices

    label = next(c for c in comparison_choices(lab_server.store) if c.startswith(f"#{cid} "))
    page.locator("#cmp-pick input").click()
    page.locator("#cmp-pick").get_by_role("option", name=label).click()
    page.locator("#cmp-summary").get_by_text("wins", exact=False).wait_for()
    rows = wait_for(lambda: grid_rows(page, "cmp-pairs"), timeout=60)
    assert sorted(r[0] for r in rows) == sorted(p["persona"] for p in pairs)
    table = page.locator("#cmp-aligned table.cmp-table")
    table.wait_for()
    first = pairs[0] if abs(pairs[0]["diff"] or 0) >= abs(pairs[1]["diff"] or 0) else pairs[1]
    n_rows = table.locator("tr.cmp-row").count()
    assert n_rows >= 2  # the opening and at least one reply, A and B in one row each
    assert table.locator("td[data-side=a] .turn-assistant").count() >= 1
    assert table.locator("td[data-side=b] .turn-assistant").count() >= 1
    if first["first_reply_diff_turn"] is not None:
        marked = table.locator("tr.cmp-first")
        assert marked.count() >= 1
    page.locator("#cmp-curves .js-plotly-plot").wait_for()


@pytest.mark.browser
@pytest.mark.process
def test_a_comparison_started_in_the_compare_view_runs_and_opens(lab_server, browser_page, grid_rows,
                                                                  tiny_model_dir):
    """Start in the browser: the comparison runs as a background job (its own process), the view shows its
    progress, and when it finishes the result opens in the view."""
    from helpers import start_comparison_in_view, wait_for
    from playwright.sync_api import expect

    page = browser_page
    cid = start_comparison_in_view(page, lab_server.store, tiny_model_dir, tiny_model_dir, limit=2)
    stored = compare.get_comparison(lab_server.store, cid)
    assert stored["config"]["a"] == stored["config"]["b"] == str(tiny_model_dir) and stored["config"]["limit"] == 2
    summary = page.locator("#cmp-summary")
    expect(summary).to_contain_text(f"#{cid}", timeout=60_000)  # the picker holds the new comparison
    expect(summary).to_contain_text("wins", timeout=400_000)  # finished: the result opens
    assert compare.get_comparison(lab_server.store, cid)["status"] == "succeeded"
    rows = wait_for(lambda: grid_rows(page, "cmp-pairs"), timeout=60)
    assert len(rows) == 2
    expect(page.locator("#cmp-job")).to_contain_text("succeeded")


@pytest.mark.browser
@pytest.mark.process
@pytest.mark.model
def test_a_comparison_runs_beside_a_benchmark_that_leaves_room(lab_server, browser_page, tiny_model_dir,
                                                                monkeypatch):
    """Two jobs side by side (trainer.jobs.admission): a long benchmark of the default policy is running; a
    comparison started in the Compare view runs at once beside it (half the cores each, both fit the memory)
    and its line says running, never queued behind the benchmark."""
    from helpers import start_comparison_in_view, wait_for
    from playwright.sync_api import expect

    from trainer.benchmarking.benchmark import start_benchmark_job
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    monkeypatch.setenv("RLVER_LAB_JOB_CORES", "2")  # whatever this machine has: two jobs of half the cores
    monkeypatch.setenv("RLVER_LAB_JOB_MEMORY_GIB", "16")
    store = lab_server.store
    bench = start_benchmark_job(store, lab_server.store_url, {"policy": "default", "profiles": "builtin",
                                                              "name": "long benchmark"})
    try:
        wait_for(lambda: job_queue.get_job(store, bench)["status"] == "running", timeout=300)
        cid = start_comparison_in_view(browser_page, store, tiny_model_dir, tiny_model_dir, limit=1)
        job = compare.comparison_job(store, cid)
        wait_for(lambda: job_queue.get_job(store, job["id"])["status"] != "queued", timeout=300)
        assert job_queue.get_job(store, bench)["status"] == "running"  # both at once
        expect(browser_page.locator("#cmp-job")).not_to_contain_text("queued", timeout=30_000)
        done = wait_for(lambda: (d := job_queue.get_job(store, job["id"]))["status"] not in ("queued", "running")
                        and d, timeout=400)
        assert done["status"] == "succeeded"
        assert job_queue.get_job(store, bench)["status"] == "running"  # it ended while the benchmark ran
    finally:
        job_control.cancel(store, bench)
        wait_for(lambda: job_queue.get_job(store, bench)["status"] not in ("queued", "running"), timeout=120)


def test_compare_start_names_every_problem_under_its_field(store, db_url, tmp_path):
    from app.services import compare_jobs

    message, cid, errors = compare_jobs.start(store, db_url, "default", str(tmp_path / "gone"), "nonsense-set",
                                              "offline", 0, 0, 2.5, -1)
    assert cid is None and set(errors) == {"b", "profiles", "seeds", "max_new_tokens", "gpus"}, errors
    assert "not found" in errors["b"] and "unknown persona set" in errors["profiles"]
    assert errors["gpus"] == "must be an integer >= 0, got -1"
    assert message == "Not started: fix the 5 problem(s) marked ⚠."
    texts = compare_jobs.error_texts(errors)
    assert [bool(t) for t in texts] == [False, True, True, False, False, True, True, True, False]
    assert compare.list_comparisons(store) == []
    assert compare_jobs.start(store, db_url, "default", "default", "builtin:heldout", "offline:v9", 1, 1, 8
                              )[2].keys() == {"simulator"}


def test_the_comparison_summary_shows_paths_as_typed():
    from app.render import code
    from app.services import compare as compare_service

    head = compare_service.summary_md({"id": 3, "status": "running", "config": {
        "a": "lab_data/runs/x_1/checkpoint", "b": "default", "profiles": "builtin:heldout", "simulator": "offline"}})
    assert "A = `lab_data/runs/x_1/checkpoint`, B = `default`" in head and "\\_" not in head.split("·")[0]
    assert code("a`b\nc") == "`a'b c`" and code("") == "` `"


@pytest.mark.browser
def test_compare_start_errors_stay_under_their_fields(lab_server, browser_page, tmp_path):
    """A refused Start's messages sit under B and the personas and outlive the view's polls (which rewrite
    the comparison's status line); the next Start clears them."""
    from playwright.sync_api import expect

    from app.views.compare import POLL_S

    page = browser_page
    before = len(compare.list_comparisons(lab_server.store))  # the module's page and store are shared
    page.reload()  # a fresh form: the module's earlier tests typed a limit and a reply cap into this one
    page.get_by_role("tab", name="Compare").click()
    for elem, value in (("cmp-b", tmp_path / "gone"), ("cmp-profiles", "nonsense-set")):
        page.locator(f"#{elem} input").fill(str(value))
        page.locator(f"#{elem} input").press("Enter")
    page.locator("#cmp-start").click()
    expect(page.locator("#cmp-start-msg")).to_contain_text("Not started: fix the 2 problem(s) marked ⚠.")
    expect(page.locator("#cmp-err-b")).to_contain_text("not found")
    expect(page.locator("#cmp-err-profiles")).to_contain_text("unknown persona set")
    page.wait_for_timeout(POLL_S * 3 * 1000)  # several polls later, nothing has been overwritten
    expect(page.locator("#cmp-start-msg")).to_contain_text("Not started")
    expect(page.locator("#cmp-err-b")).to_contain_text("not found")
    page.locator("#cmp-profiles input").fill("builtin:heldout")
    page.locator("#cmp-profiles input").press("Enter")
    expect(page.locator("#cmp-err-profiles")).to_have_text("")  # the field changed: its error goes at once
    expect(page.locator("#cmp-err-b")).to_contain_text("not found")  # the others' stay
    expect(page.locator("#cmp-expected")).to_contain_text("16 dialogues of up to 10 replies × 4096 tokens")
    page.locator("#cmp-quick input").check()  # B has never run here: its pace is unknown, the counts are said
    expect(page.locator("#cmp-expected")).to_contain_text("2 dialogues of up to 10 replies × 16 tokens")
    page.locator("#cmp-start").click()
    expect(page.locator("#cmp-err-profiles")).to_have_text("")
    expect(page.locator("#cmp-start-msg")).to_contain_text("Not started: fix the 1 problem(s) marked ⚠.")
    assert len(compare.list_comparisons(lab_server.store)) == before and page.dialogs == []


# ------------------------------------------------------------------------------------ bring your own
RULE_USER = REPO / "docs" / "examples" / "rule_user.py"


@pytest.mark.model
def test_outside_specs_are_checked_without_importing():
    from simulator.user.backends import spec_error
    from trainer.config import TrainConfig

    assert spec_error(f"python:{RULE_USER}:make_user") == ""
    assert "expected python:MODULE:NAME" in spec_error("python:nothing")
    assert "no file" in spec_error("python:/no/such/file.py:make_user")
    errors = TrainConfig(reward="python:oops").errors()
    assert "expected python:MODULE:NAME" in errors["reward"]
    assert "unknown reward" in TrainConfig(reward="emotion").errors()["reward"]


@pytest.mark.model
def test_training_against_an_outside_user_and_reward(tiny_model_dir, tmp_path):
    """The docs example end to end: its rule-based user and its reward train the tiny policy, and every
    dialogue carries the outside code's name and file hash in its simulator fingerprint."""
    import hashlib

    from helpers import tiny_train_config
    from sqlalchemy import select

    from storage import Dialogue, Job, make_store, read_scope

    config = tiny_train_config(tmp_path, tiny_model_dir, simulator=f"python:{RULE_USER}:make_user",
                               reward=f"python:{RULE_USER}:emotion_gain", algorithm="grpo", group_size=2,
                               max_turns=2)
    db = f"sqlite:///{tmp_path / 'lab.db'}"
    r = run_in_process("trainer", "train", "--config", str(config), "--db", db, "--json",
                       env={"RLVER_LAB_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded"
    digest = hashlib.sha256(RULE_USER.read_bytes()).hexdigest()
    store = make_store(db)
    with read_scope(store) as s:
        dialogues = s.scalars(select(Dialogue).where(Dialogue.job_id == result["job_id"])).all()
        assert dialogues and all(d.simulator_fingerprint["backend"] == "python" for d in dialogues)
        assert {d.simulator_fingerprint["outside"]["sha256"] for d in dialogues} == {digest}
        assert all(d.simulator_fingerprint["model"] == "rule-user" for d in dialogues)
        job = s.get(Job, result["job_id"])
        assert job.config["reward_source"]["name"] == "emotion_gain" and job.config["reward_source"]["sha256"] == digest
    store.dispose()


@pytest.mark.model
def test_reproducing_a_stored_run_plays_the_same_dialogues(store, tiny_model_dir):
    from trainer.benchmarking import benchmark

    # rounds: the policy's batches do not depend on timing (async batches whatever is ready, and on a busy
    # machine another batch composition rounds the logits differently)
    first = off_loop(lambda: benchmark.run_benchmark(store, benchmark.BenchmarkConfig(
        policy=str(tiny_model_dir), profiles="builtin:heldout", limit=3, max_new_tokens=12, seed=5, schedule="rounds"),
        log=lambda _m: None))
    config = compare.reproduce_config(store, first.eval_run_id)
    assert config.seed == 5 and config.policy == str(tiny_model_dir) and config.name == f"reproduce #{first.eval_run_id}"
    assert config.schedule == "rounds"
    again = off_loop(lambda: benchmark.run_benchmark(store, config, log=lambda _m: None))
    cid = compare.link_eval_runs(store, first.eval_run_id, again.eval_run_id)
    pairs = compare.comparison_pairs(store, cid, with_turns=True)
    assert len(pairs) == 3
    for p in pairs:
        assert p["first_reply_diff_turn"] is None and p["first_emotion_diff_turn"] is None
        assert [(t["role"], t["text"]) for t in p["a_turns"]] == [(t["role"], t["text"]) for t in p["b_turns"]]
    assert compare.get_comparison(store, cid)["summary"]["ties"] == 3
    with pytest.raises(BenchmarkInputError, match="eval_run: 999 does not exist"):
        compare.reproduce_config(store, 999)


def test_a_mistyped_name_is_not_found_and_the_form_says_what_to_expect(store, db_url, monkeypatch):
    """From the web a bare name is 'not found' (no path check's permission words, and nothing looked up on the
    machine); a path outside the lab keeps the permission message, whatever exists there; the form's line says
    what a comparison is expected to take, and a quick look's is shorter."""
    from app.services import compare_jobs
    from simulator.access import ACCESS_ENV, Access

    monkeypatch.setenv(ACCESS_ENV, Access.web(logged_in=True).to_json())
    _, cid, errors = compare_jobs.start(store, db_url, "my-checkpiont", "default", "builtin:heldout", "offline",
                                        1, 1, 16)
    assert cid is None and errors["a"].startswith("'my-checkpiont' not found") and "b" not in errors
    for outside in ("/etc", "/nowhere/at/all"):
        _, _, errors = compare_jobs.start(store, db_url, outside, "default", "builtin:heldout", "offline", 1, 1, 16)
        assert "not found" not in errors["a"] and "must lie inside the lab's folders" in errors["a"]
    full = compare_jobs.expected_text(store, "default", "default", "builtin:heldout", 0, 1, 0)
    quick = compare_jobs.expected_text(store, "default", "default", "builtin:heldout", 1, 1, 16)
    assert full.startswith("Expected: about ") and "2 sides × 8 personas × 1 seed" in full
    assert "2 sides × 1 persona × 1 seed" in quick and "16 tokens" in quick
