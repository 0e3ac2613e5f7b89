"""`python -m trainer train|resume` end to end on the tiny model: the store fills, kill -9 -> resume."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from helpers import BACKENDS, metric_steps, tiny_train_config, trainer_cli, trainer_run, wait_for, wait_for_step
from sqlalchemy import select

from storage import Checkpoint, Dialogue, Job, make_store, read_scope

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.model
@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_train_command_runs_a_job_that_fills_the_store(tiny_model_dir: Path, tmp_path: Path, db_url: str):
    config = tiny_train_config(tmp_path, tiny_model_dir)
    r = trainer_run("train", "--config", str(config), "--db", db_url, "--json", env_home=tmp_path / "home")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["steps"] == 2 and result["error"] == ""
    assert result["checkpoint"].endswith("step-000002") and "reward_mean" in result["metrics"]
    store = make_store(db_url)
    with read_scope(store) as s:
        job = s.get(Job, result["job_id"])
        assert (job.kind, job.status, job.step, job.total_steps, job.progress) == ("train", "succeeded", 2, 2, 1.0)
        assert job.pid and job.heartbeat_at and job.config["model"] == str(tiny_model_dir)
        assert Path(job.log_path).read_text().count("step 2/2") == 1
        ckpts = s.scalars(select(Checkpoint).where(Checkpoint.job_id == job.id).order_by(Checkpoint.step)).all()
        assert [c.step for c in ckpts] == [1, 2]
        dialogues = s.scalars(select(Dialogue).where(Dialogue.job_id == job.id)).all()
        assert sorted({d.step for d in dialogues}) == [1, 2] and len(dialogues) == 8
        assert all(d.source == "train" and d.status == "finished" and d.final_emotion is not None
                   for d in dialogues)
    for name in ("reward_mean", "final_emotion_mean", "success_rate", "failure_rate", "approx_kl", "entropy",
                 "clip_frac", "grad_norm", "reply_tokens_mean", "tokens_per_s", "value_loss"):
        assert metric_steps(store, result["job_id"], name) == [1, 2], name
    # the checkpoint is a Hugging Face folder with the chat template
    from transformers import AutoModelForCausalLM, AutoTokenizer

    policy = Path(result["checkpoint"]) / "policy"
    assert result["policy_path"] == str(policy)
    AutoModelForCausalLM.from_pretrained(result["policy_path"])
    assert AutoTokenizer.from_pretrained(policy).chat_template
    assert (Path(result["checkpoint"]) / "critic" / "value_head.pt").exists()
    store.dispose()
    for args in (["jobs", str(result["job_id"])], ["jobs"]):  # the job's JSON row says the same
        listed = trainer_run(*args, "--db", db_url, "--json", env_home=tmp_path / "home")
        row = json.loads(listed.stdout.strip().splitlines()[-1])
        assert listed.returncode == 0 and row["status"] == "succeeded"
        assert (row["checkpoint"], row["policy_path"]) == (result["checkpoint"], result["policy_path"])


def test_invalid_config_is_refused_with_the_field_named(tmp_path: Path, db_url: str, tiny_model_dir: Path):
    config = tiny_train_config(tmp_path, tiny_model_dir, actor_lr=-1.0, algorithm="grpo", group_size=1)
    r = trainer_run("train", "--config", str(config), "--db", db_url, env_home=tmp_path / "home")
    assert r.returncode == 2 and r.stdout == ""
    assert "actor_lr: must be positive" in r.stderr and "group_size" in r.stderr
    r = trainer_run("train", "--config", str(config), "--set", "actor_lr=1e-4", "--set", "group_size=2",
                    "--set", "persona_set=nobody", "--db", db_url, env_home=tmp_path / "home")
    assert r.returncode == 2 and "persona_set: unknown persona set 'nobody'" in r.stderr
    r = trainer_run("train", "--config", str(config), "--set", "actor_lr=1e-4", "--set", "group_size=2",
                    "--set", "nodes=2", "--db", db_url, env_home=tmp_path / "home")  # two nodes, one process
    assert r.returncode == 2 and "nodes: 2 with gpus: 0 runs 2 rank(s), placed by Ray" in r.stderr, r.stderr
    store = make_store(db_url)
    with read_scope(store) as s:
        assert s.scalars(select(Job)).all() == []  # nothing half-created
    store.dispose()


@pytest.mark.slow
def test_kill_9_then_resume_continues_without_losing_or_repeating_a_step(tiny_model_dir: Path, tmp_path: Path,
                                                                         db_url: str):
    from trainer.jobs import queue as job_queue

    steps = 5
    config = tiny_train_config(tmp_path, tiny_model_dir, steps=steps, save_every=2)
    home = tmp_path / "home"
    proc = trainer_cli("train", "--config", str(config), "--db", db_url, env_home=home, start_new_session=True)
    store = make_store(db_url)
    job_id = wait_for_step(store, proc, 3)  # the step-2 checkpoint is written before step 3's metrics
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: job_queue.reap_dead_jobs(store) == [job_id])  # the reaper, once its lock is free
    with read_scope(store) as s:
        assert s.get(Job, job_id).status == "interrupted"
    assert job_queue.last_checkpoint(store, job_id)["step"] >= 2

    resumed = trainer_cli("resume", str(job_id), "--db", db_url, "--json", env_home=home)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["steps"] == steps
    assert "resumed from" in out
    for name in ("reward_mean", "policy_loss", "entropy"):
        assert metric_steps(store, job_id, name) == list(range(1, steps + 1)), name
    with read_scope(store) as s:
        ckpt_steps = [c.step for c in s.scalars(select(Checkpoint).where(Checkpoint.job_id == job_id))]
        dialogue_steps = [d.step for d in s.scalars(select(Dialogue).where(Dialogue.job_id == job_id))]
    assert sorted(dialogue_steps) == [step for step in range(1, steps + 1) for _ in range(4)]
    assert sorted(ckpt_steps) == sorted(set(ckpt_steps)) and max(ckpt_steps) == steps
    store.dispose()


def test_resume_refuses_a_job_that_is_not_resumable(tmp_path: Path, db_url: str):
    from trainer.jobs import queue as job_queue

    store = make_store(db_url)
    job_id = job_queue.create_job(store, "train", {"steps": 1})
    r = trainer_run("resume", str(job_id), "--db", db_url, env_home=tmp_path / "home")
    assert r.returncode == 2 and "only an interrupted, failed or cancelled job" in r.stderr
    r = trainer_run("resume", "999", "--db", db_url, env_home=tmp_path / "home")
    assert r.returncode == 2 and "job 999 is not a job in this store" in r.stderr
    store.dispose()


def test_stalled_trainer_keeps_its_job_resume_refuses_and_one_writer_remains(tiny_model_dir: Path, tmp_path: Path,
                                                                            db_url: str):
    """The reported stall: the trainer stopped (SIGSTOP) after step 2, `trainer resume` run meanwhile. It
    is refused (the stalled process still owns the job) and, woken, the first trainer finishes alone:
    4 dialogues per step, never 8."""
    steps = 4
    config = tiny_train_config(tmp_path, tiny_model_dir, steps=steps, save_every=1)
    home = tmp_path / "home"
    proc = trainer_cli("train", "--config", str(config), "--db", db_url, env_home=home, start_new_session=True)
    store = make_store(db_url)
    job_id = wait_for_step(store, proc, 2)
    os.killpg(proc.pid, signal.SIGSTOP)
    try:
        resumed = trainer_cli("resume", str(job_id), "--db", db_url, env_home=home)
        out, _ = resumed.communicate(timeout=600)
        assert resumed.returncode == 2 and f"still owned by live process {proc.pid}" in out, out
    finally:
        os.killpg(proc.pid, signal.SIGCONT)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        assert job.status == "succeeded" and job.pid == proc.pid
        dialogue_steps = [d.step for d in s.scalars(select(Dialogue).where(Dialogue.job_id == job_id))]
    assert sorted(dialogue_steps) == [step for step in range(1, steps + 1) for _ in range(4)]
    store.dispose()


@pytest.mark.model
def test_train_with_a_preset_and_a_config_file_over_it(tiny_model_dir: Path, tmp_path: Path, db_url: str):
    """--preset first, the file's settings over it: cpu-demo's LoRA and sampling, the tiny file's model and size."""
    config = tiny_train_config(tmp_path, tiny_model_dir)
    r = trainer_run("train", "--preset", "cpu-demo", "--config", str(config), "--db", db_url, "--json",
                    env_home=tmp_path / "home")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["steps"] == 2
    store = make_store(db_url)
    with read_scope(store) as s:
        job = s.get(Job, result["job_id"])
        assert job.name == "train"  # the config file's name
        assert (job.config["model"], job.config["algorithm"], job.config["max_new_tokens"]) == \
            (str(tiny_model_dir), "ppo", 8)  # from the file
        assert (job.config["lora"], job.config["temperature"], job.config["entropy_coef"]) == (True, 0.7, 0.001)
        assert "gate_proj" in job.config["lora_target_modules"]  # from the preset
    store.dispose()
    r = trainer_run("train", "--preset", "no-such", "--db", db_url, env_home=tmp_path / "home")
    assert r.returncode == 2 and "invalid choice: 'no-such'" in r.stderr and "cpu-demo" in r.stderr
