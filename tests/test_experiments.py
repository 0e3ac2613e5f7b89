"""Experiments (trainer/experiments/grid.py, trainer/experiments/runner.py, `python -m trainer experiment`, and the
Experiments view's service functions) on a real SQLite file with the tiny model: grid expansion and its
errors, the queue, the automatic held-out benchmark, cancel and resume."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import run_in_process, wait_for

from app.services import experiments
from trainer.experiments import grid as experiment_grid
from trainer.jobs import queue as job_queue

REPO = Path(__file__).resolve().parent.parent


def tiny_grid(tmp_path: Path, model: Path, **changes) -> Path:
    """configs/experiment-tiny.yaml with the tiny model and the given top-level changes (base and benchmark
    are merged, anything else replaced); its path."""
    data = yaml.safe_load((REPO / "configs" / "experiment-tiny.yaml").read_text())
    data["base_config"] = str(REPO / "configs" / "tiny-test.yaml")
    data["base"]["model"] = str(model)
    for key, value in changes.items():
        if key in ("base", "benchmark"):
            data[key].update(value)
        else:
            data[key] = value
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def experiment_cli(db_url: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "trainer", "experiment", *args, "--db", db_url, "--json"], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# ------------------------------------------------------------------------------------------- the grid file
def test_the_grid_expands_to_the_cartesian_product_in_order(tmp_path, tiny_model_dir):
    spec = experiment_grid.load_grid(tiny_grid(tmp_path, tiny_model_dir))
    assert [experiment_grid.cell_label(c) for c in spec.cells()] == [
        "algorithm=ppo, mode=direct", "algorithm=ppo, mode=think", "algorithm=grpo, mode=direct",
        "algorithm=grpo, mode=think"]
    assert spec.base["steps"] == 1 and spec.base["max_new_tokens"] == 8  # inline base over the base_config file
    assert spec.benchmark["profiles"] == "builtin:heldout" and spec.parallel == 1
    assert experiment_grid.expand({}) == [{}]


@pytest.mark.model
def test_every_problem_of_a_grid_is_named_with_its_key_and_cell(tmp_path, tiny_model_dir):
    path = tiny_grid(tmp_path, tiny_model_dir, grid={"algorithm": ["ppo", "sgd"], "mode": ["direct"], "algo": [1],
                                                     "seed": []},
                     benchmark={"policy": "default", "profile": "x"}, judge={"base_url": "http://x"}, parallel=0)
    with pytest.raises(experiment_grid.ExperimentError) as err:
        experiment_grid.load_grid(path)
    e = err.value.errors
    assert e["grid.algo"] == "not a TrainConfig field"
    assert "non-empty list" in e["grid.seed"]
    assert "each cell's final checkpoint" in e["benchmark.policy"]
    assert e["benchmark.profile"] == "not a benchmark setting"
    assert "required" in e["judge.model"] and ">= 1" in e["parallel"]
    # the well-formed grid keys' values are checked beside the file's other problems, all named at once
    assert "unknown value 'sgd'" in e["cell 2 (algorithm=sgd, mode=direct): algorithm"]
    assert not any(k.startswith("cell 1 ") for k in e)
    # values are checked per cell once the keys are right
    path = tiny_grid(tmp_path, tiny_model_dir, grid={"algorithm": ["ppo", "sgd"], "steps": [1, "two"]})
    with pytest.raises(experiment_grid.ExperimentError) as err:
        experiment_grid.load_grid(path)
    e = err.value.errors
    assert "unknown value 'sgd'" in e["cell 3 (algorithm=sgd, steps=1): algorithm"]
    assert "must be int" in e["cell 2 (algorithm=ppo, steps=two): steps"]
    assert "cell 1 (algorithm=ppo, steps=1): algorithm" not in e
    with pytest.raises(experiment_grid.ExperimentError, match="base_config: file .*missing.yaml"):
        experiment_grid.parse_grid("name: x\nbase_config: missing.yaml\ngrid: {seed: [0]}\n", tmp_path)
    with pytest.raises(experiment_grid.ExperimentError, match="grid file: not valid YAML"):
        experiment_grid.parse_grid("name: [x", tmp_path)


def test_the_cpu_example_grid_is_valid_and_has_four_cells():
    spec = experiment_grid.load_grid(REPO / "configs" / "experiment-cpu.yaml", check_paths=False)
    assert len(spec.cells()) == 4 and spec.benchmark["profiles"] == "builtin:heldout"
    assert experiments.example_grid().startswith("# RLVER's comparisons")


# ------------------------------------------------------------------------------------------------- store
def test_create_cancel_and_reopen_in_the_store(store, tmp_path, tiny_model_dir):
    spec = experiment_grid.load_grid(tiny_grid(tmp_path, tiny_model_dir))
    eid = experiment_grid.create_experiment(store, spec)
    exp = experiment_grid.experiment_detail(store, eid)
    assert exp["status"] == "queued" and exp["code_version"] and exp["grid"] == spec.grid
    assert [c["status"] for c in exp["cells"]] == ["queued"] * 4
    assert exp["cells"][3]["config"]["algorithm"] == "grpo" and exp["cells"][3]["config"]["mode"] == "think"
    assert experiments.experiment_choices(store) == [(f"#{eid} tiny-algorithm-x-mode · queued · 4 cells", eid)]
    assert experiment_grid.cancel_experiment(store, eid) == "cancelled"
    assert {c["status"] for c in experiment_grid.experiment_detail(store, eid)["cells"]} == {"cancelled"}
    assert experiment_grid.reopen_experiment(store, eid) == []
    exp = experiment_grid.experiment_detail(store, eid)
    assert exp["status"] == "queued" and {c["status"] for c in exp["cells"]} == {"queued"}
    with pytest.raises(experiment_grid.ExperimentError, match="999 does not exist"):
        experiment_grid.cancel_experiment(store, 999)


def test_the_runner_owns_its_experiment_in_the_store_and_a_running_one_without_runner_shows_dead(store, tmp_path,
                                                                                                  tiny_model_dir):
    """Ownership and liveness from the store, whichever machine reads it: a runner of this host lives while its
    pid does and it beats; one of another host while it beats; a dead one is resumable and its pid forgotten."""
    from datetime import timedelta

    from storage import Experiment, session_scope
    from storage.models import utcnow
    from trainer.experiments.owner import RunnerHeartbeat
    from trainer.experiments.runner import run_experiment, runner_alive
    from trainer.jobs.backend import host_name

    def set_runner(pid, host, beat_age_s):
        with session_scope(store) as s:
            exp = s.get(Experiment, eid)
            exp.status, exp.runner_pid, exp.runner_host = "running", pid, host
            exp.runner_heartbeat_at = utcnow() - timedelta(seconds=beat_age_s)

    eid = experiment_grid.create_experiment(store, experiment_grid.load_grid(tiny_grid(tmp_path, tiny_model_dir)))
    with session_scope(store) as s:  # what a runner killed with -9 before its first beat leaves
        s.get(Experiment, eid).status = "running"
    exp = experiment_grid.experiment_detail(store, eid)
    assert exp["status"] == "dead" and exp["stored_status"] == "running" and not runner_alive(exp)
    assert [e["status"] for e in experiment_grid.list_experiments(store)] == ["dead"]
    for pid, host in ((os.getpid(), host_name()), (12345, "another-node")):  # live runners, here and elsewhere
        set_runner(pid, host, beat_age_s=1)
        exp = experiment_grid.experiment_detail(store, eid)
        assert exp["status"] == "running" and exp["runner"] == pid and runner_alive(exp)
        with pytest.raises(experiment_grid.ExperimentError, match=f"already run by live process {pid} on {host}"):
            run_experiment(store, "unused://", eid)
        with pytest.raises(experiment_grid.ExperimentError, match=f"being run by live process {pid} on {host}"):
            experiment_grid.reopen_experiment(store, eid)
    set_runner(12345, "another-node", beat_age_s=120)  # its heartbeat stopped: dead, resumable from here
    assert experiment_grid.experiment_detail(store, eid)["status"] == "dead"
    set_runner(2 ** 22 + 7, host_name(), beat_age_s=1)  # a runner of this host whose process is gone: dead at once
    assert experiment_grid.experiment_detail(store, eid)["status"] == "dead"
    assert experiment_grid.reopen_experiment(store, eid) == []
    exp = experiment_grid.experiment_detail(store, eid)
    assert exp["status"] == "queued" and (exp["runner_pid"], exp["runner_host"]) == (None, "")
    set_runner(os.getpid(), host_name(), beat_age_s=0)  # a runner that lost its experiment stops beating it
    beat = RunnerHeartbeat(store, eid, os.getpid())
    assert beat.beat()
    set_runner(12345, "another-node", beat_age_s=0)
    assert not beat.beat() and beat.lost


# ------------------------------------------------------------------------------------ real job processes
# Each of these runs several job processes one after another; on a shared 2-core machine that takes longer
# than the suite's default per-test limit.
@pytest.mark.process
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cli_trains_each_cell_benchmarks_its_checkpoint_and_judges_it(store, db_url, tmp_path, tiny_model_dir):
    from testkit.scripted_server import start_server

    with start_server() as server:  # the judge's OpenAI-compatible endpoint
        grid = tiny_grid(tmp_path, tiny_model_dir, grid={"algorithm": ["ppo"], "mode": ["direct", "think"]},
                         judge={"model": "scripted", "base_url": server.base_url})
        r = run_in_process("trainer", "experiment", "--grid", str(grid), "--db", db_url, "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and len(result["cells"]) == 2
    exp = experiment_grid.experiment_detail(store, result["experiment_id"])
    for cell, row in zip(exp["cells"], result["cells"]):
        assert cell["status"] == "succeeded" and row["n"] == 1 and row["score"] is not None
        bench = job_queue.job_detail(store, cell["benchmark_job_id"])
        checkpoint = job_queue.last_checkpoint(store, cell["train_job_id"])["path"]
        assert bench["status"] == "succeeded" and bench["config"]["policy"] == checkpoint
        assert bench["config"]["mode"] == cell["params"]["mode"] and bench["config"]["profiles"] == "builtin:heldout"
    # what the Experiments view shows of it
    rows = experiments.result_rows(store, exp)
    assert [r[0] for r in rows] == ["cell 1", "cell 2"] and all(r[2] != "—" and r[8] == 1 for r in rows)
    assert [r[0] for r in experiments.status_rows(exp)] == ["cell 1", "cell 2"]
    need, personality = experiments.breakdown_rows(store, exp)
    assert [r[0] for r in need] == ["cell 1", "cell 2"] and len(personality) == 2
    replies = experiments.reply_rows(store, exp)
    assert all(r[2] >= 1 and r[3] != "—" for r in replies)
    assert experiments.metric_choices(store, exp)[0] == "reward_mean"  # reward first
    fig = experiments.curves(store, exp, "reward_mean")
    assert len(fig.data) == 2 and fig.data[0].name.startswith("cell 1")
    radar = experiments.judge_figure(store, exp)  # one shape per cell, each judged dialogue stored
    assert [t.name.split(" · ")[0] for t in radar.data] == ["cell 1 algorithm=ppo, mode=direct",
                                                            "cell 2 algorithm=ppo, mode=think"]
    assert experiments.judge_counts(store, exp) == {"cell 1": 1, "cell 2": 1}
    assert "succeeded" in experiments.summary_md(exp) and "2/2 cells done" in experiments.summary_md(exp)


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_cancel_stops_the_experiment_and_resume_continues_from_the_checkpoint(store, db_url, tmp_path,
                                                                              tiny_model_dir):
    grid = tiny_grid(tmp_path, tiny_model_dir, base={"steps": 4, "save_every": 1},
                     grid={"algorithm": ["ppo"], "seed": [0, 1]})
    p = experiment_cli(db_url, "--grid", str(grid))
    eid = wait_for(lambda: experiment_grid.list_experiments(store) and experiment_grid.list_experiments(store)[0]["id"],
                   timeout=300)
    first = lambda: experiment_grid.experiment_detail(store, eid)["cells"][0]  # noqa: E731
    wait_for(lambda: first()["train_job_id"] and job_queue.last_checkpoint(store, first()["train_job_id"]), timeout=900)
    second = run_in_process("trainer", "experiment", "--resume", str(eid), "--db", db_url, "--json")
    assert second.returncode == 2 and f"{eid} is being run by live process {p.pid} on " in second.stderr
    canceller = experiment_cli(db_url, "--cancel", str(eid))
    assert canceller.wait(timeout=300) == 0
    _, err = p.communicate(timeout=600)
    assert p.returncode == 143, err
    train_id = first()["train_job_id"]
    wait_for(lambda: job_queue.job_detail(store, train_id)["status"] in job_queue.FINAL_STATUSES, timeout=600)
    exp = experiment_grid.experiment_detail(store, eid)
    assert exp["status"] == "cancelled" and [c["status"] for c in exp["cells"]] == ["cancelled", "cancelled"]
    assert exp["cells"][1]["train_job_id"] is None  # the queued cell never started a job
    done = job_queue.job_detail(store, train_id)
    if done["status"] == "succeeded":
        pytest.skip("the training job finished before Cancel reached it (machine too fast for this test)")
    assert done["status"] == "cancelled"
    saved = job_queue.last_checkpoint(store, train_id)["step"]

    resumed = run_in_process("trainer", "experiment", "--resume", str(eid), "--db", db_url, "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and [c["status"] for c in result["cells"]] == ["succeeded"] * 2
    assert result["cells"][0]["train_job_id"] == train_id  # the same job, continued
    detail = job_queue.job_detail(store, train_id, log_lines=400)
    assert f"at step {saved}" in detail["log_tail"]
    assert detail["metrics"]["reward_mean"]["step"] == [1, 2, 3, 4]  # nothing trained twice, nothing skipped
