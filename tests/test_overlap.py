"""Overlapped, staleness-bounded training (trainer/learning/overlap.py): staleness 0 is today's step bit for bit, the
bound holds (a dialogue beyond it is dropped with its group, never trained), every reply records its policy
version in the store, the decoupled objective's math, and the store upgrade that adds the version column."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from sqlalchemy import select, text

from storage import Dialogue, Turn, make_store, read_scope
from trainer.config import ConfigError, TrainConfig
from trainer.learning import algorithms


def _config(model: Path, tmp_path: Path, **changes) -> TrainConfig:
    base = dict(model=str(model), algorithm="grpo", group_size=2, dialogues_per_step=4, minibatch_size=4,
                micro_batch_size=2, steps=3, max_turns=2, max_new_tokens=6, max_dialogue_tokens=1024, save_every=0,
                actor_lr=1e-3, report_to=["none"], rollout_schedule="rounds", output_dir=str(tmp_path / "run"))
    base.update(changes)
    return TrainConfig(**base)


STEP_METRICS = ("reward_mean", "policy_loss", "entropy", "grad_norm", "approx_kl", "clip_frac", "advantage_mean",
                "final_emotion_mean")


def _first_step(cfg: TrainConfig) -> tuple[dict, dict]:
    from trainer.learning.rl_trainer import RLTrainer

    trainer = RLTrainer(cfg)
    try:
        metrics = trainer.train_step(1)
    finally:
        trainer._stop_overlap()
    weights = {k: v.clone() for k, v in trainer.learner.policy.module.state_dict().items()}
    return metrics, weights


@pytest.mark.model
def test_a_step_with_nothing_stale_is_bit_identical_to_the_on_policy_step(tiny_model_dir: Path, tmp_path: Path):
    """Step 1 of an overlapped run (max_staleness 1: snapshot engine, background rollouts, step 2 already in
    flight, the decoupled-loss code path) samples and updates exactly as the alternating loop does."""
    on_metrics, on_weights = _first_step(_config(tiny_model_dir, tmp_path / "a", max_staleness=0))
    ov_metrics, ov_weights = _first_step(_config(tiny_model_dir, tmp_path / "b", max_staleness=1))
    for key in STEP_METRICS:
        assert ov_metrics[key] == on_metrics[key], key
    assert on_weights.keys() == ov_weights.keys()
    assert all(torch.equal(on_weights[k], ov_weights[k]) for k in on_weights)
    assert on_metrics["policy_lag_max"] == ov_metrics["policy_lag_max"] == 0.0
    assert "stale_token_share" not in on_metrics and "stale_token_share" not in ov_metrics


def test_decoupled_loss_without_stale_tokens_is_the_ppo_loss_exactly():
    g = torch.Generator().manual_seed(0)
    logprobs = -torch.rand(3, 7, generator=g).requires_grad_(True)
    old, behaviour = -torch.rand(3, 7, generator=g), -torch.rand(3, 7, generator=g)
    adv, mask = torch.randn(3, 7, generator=g), (torch.rand(3, 7, generator=g) > 0.3).float()
    ppo = algorithms.ppo_policy_loss(logprobs, old, adv, mask, 0.2, 11.0)
    dec = algorithms.decoupled_policy_loss(logprobs, old, behaviour, torch.zeros_like(mask), adv, mask, 0.2, 2.0,
                                           "decoupled_ppo", 11.0)
    for a, b in zip(ppo, dec[:3]):
        assert torch.equal(a, b)
    assert dec[3]["stale"] == 0


@pytest.mark.parametrize("estimator, expected_weights", [("decoupled_ppo", [math.exp(0.5), 0.0, 1.0]),
                                                         ("truncated_is", [math.exp(0.5), 2.0, 1.0])])
def test_stale_tokens_are_weighed_by_proximal_over_behaviour_probability(estimator, expected_weights):
    """Three tokens, A = 1, the policy equal to the proximal one (r = 1, no clipping): the per-token
    gradient of the loss is -w / denom. Token 0: w = e^0.5; token 1: w = e^1.5 > cap 2 (AReaL leaves it
    out, TIS truncates it to 2); token 2 is fresh: w = 1 whatever its recorded log-prob says."""
    prox = torch.tensor([[-1.0, -1.0, -1.0]])
    behaviour = torch.tensor([[-1.5, -2.5, -3.0]])
    stale, mask, adv = torch.tensor([[1.0, 1.0, 0.0]]), torch.ones(1, 3), torch.ones(1, 3)
    logprobs = prox.clone().requires_grad_(True)
    loss, _, _, sums = algorithms.decoupled_policy_loss(logprobs, prox, behaviour, stale, adv, mask, 0.2, 2.0,
                                                        estimator, 3.0)
    loss.backward()
    assert logprobs.grad[0].tolist() == pytest.approx([-w / 3.0 for w in expected_weights])
    assert (sums["stale"], sums["capped"]) == (2.0, 1.0)
    assert float(sums["weight"]) == pytest.approx(sum(expected_weights[:2]))


@pytest.mark.process
def test_config_names_the_overlap_fields_and_their_problems(tiny_model_dir: Path, tmp_path: Path):
    with pytest.raises(ConfigError) as err:
        _config(tiny_model_dir, tmp_path, max_staleness=-1, off_policy_estimator="vtrace",
                behaviour_weight_cap=0.5, partial_rollouts="yes").validate()
    assert set(err.value.errors) >= {"max_staleness", "off_policy_estimator", "behaviour_weight_cap",
                                     "partial_rollouts"}
    assert err.value.errors["partial_rollouts"] == "must be true or false, got 'yes'"
    assert "one of decoupled_ppo, truncated_is" in err.value.errors["off_policy_estimator"]
    with pytest.raises(ConfigError, match="max_staleness: overlapped training needs whole weights"):
        _config(tiny_model_dir, tmp_path, max_staleness=1, deepspeed="zero3").validate(check_paths=False)


def _rollout_at(engine, version: int, profiles, step: int) -> list:
    """Real dialogues sampled by the versioned engine with its weights named `version`."""
    from simulator.user.spec import SimulatorSpec
    from trainer.rollout.dialogue_rollout import DialogueRollout, RolloutConfig

    engine.set_version(version)
    rollout = DialogueRollout(engine, SimulatorSpec("offline").factory(),
                            RolloutConfig(max_turns=2, max_new_tokens=6, max_tokens=1024, seed=step))
    return rollout.run(profiles, group_size=2)


def test_a_dialogue_beyond_the_bound_is_dropped_with_its_group_and_never_trained(tiny_model_dir: Path,
                                                                                tmp_path: Path):
    from trainer.learning.learner import Learner, make_batch
    from trainer.learning.overlap import within_bound
    from trainer.learning.rl_trainer import training_personas
    from trainer.policies.hf_engine import HFEngine
    from trainer.policies.versioned import VersionedEngine

    cfg = _config(tiny_model_dir, tmp_path, max_staleness=1)
    learner = Learner(cfg, tiny_model_dir)
    engine = VersionedEngine(HFEngine(tiny_model_dir, device="cpu"))
    profiles = training_personas(cfg)[:2]
    old = _rollout_at(engine, 0, profiles[:1], step=1)  # a group sampled 2 updates before the learner
    fresh = _rollout_at(engine, 1, profiles[1:], step=2)  # one update behind: within max_staleness 1
    assert {s.oldest_version() for s in old} == {0} and {s.oldest_version() for s in fresh} == {1}
    kept, dropped = within_bound(old + fresh, learner_version=2, max_staleness=1)
    assert [s.key for s in dropped] == [s.key for s in old] and [s.key for s in kept] == [s.key for s in fresh]
    batch = make_batch(kept, learner.tokenizer.pad_token_id, rewards=[0.5, 0.1])
    assert set(batch.versions[batch.action_mask.bool()].tolist()) == {1}  # no token of the old group
    metrics = learner.update(batch, policy_version=2)
    assert metrics["stale_token_share"] == 1.0 and 0 <= metrics["behaviour_weight_capped"] <= 1
    # a member of a group beyond the bound takes its whole group with it
    fresh[0].reply_versions[0] = 0
    kept, dropped = within_bound(fresh, learner_version=2, max_staleness=1)
    assert kept == [] and len(dropped) == 2


@pytest.mark.model
def test_overlapped_run_records_every_reply_version_and_stays_within_the_bound(tiny_model_dir: Path,
                                                                               tmp_path: Path, store):
    from trainer.learning.rl_trainer import RLTrainer

    steps = 4
    cfg = _config(tiny_model_dir, tmp_path, max_staleness=1, steps=steps, rollout_schedule="async")
    trainer = RLTrainer(cfg, store=store)
    history = {step: trainer.train_step(step) for step in range(1, steps + 1)}
    trainer._stop_overlap()
    assert all(m["dialogues_beyond_bound"] == 0 and m["policy_lag_max"] <= 1 for m in history.values())
    assert history[1]["policy_lag_max"] == 0  # the first step has nothing older than the initial weights
    assert all(0 <= m["learner_idle_share"] <= 1 and m["learner_busy_s"] > 0 for m in history.values())
    with read_scope(store) as s:
        dialogues = s.scalars(select(Dialogue)).all()
        assert sorted(d.step for d in dialogues) == [k for k in range(1, steps + 1) for _ in range(4)]
        for d in dialogues:
            assert d.status == "finished", d.error
            versions = [t.policy_version for t in d.turns if t.role == "assistant"]
            assert versions and None not in versions
            assert versions == sorted(versions)  # a partial rollout only moves forward
            assert d.step - 1 - min(versions) <= 1 and max(versions) <= d.step - 1, (d.step, versions)
            assert all(t.policy_version is None for t in d.turns if t.role == "user")
        groups = {}
        for d in dialogues:
            groups.setdefault((d.step, d.group_id), []).append(d)
        assert all(len(members) == 2 for members in groups.values())  # groups trained whole


SLOW_USER = """
import asyncio
from simulator.user.agent import UserTurn


class SlowUser:
    def __init__(self, profile, seed):
        self.replies = 0

    async def opening(self):
        return UserTurn(text="I had a hard day.", emotion=50.0)

    async def respond(self, dialogue, reply):
        await asyncio.sleep(0.5)  # an API simulator's latency: the learner's update is shorter than a dialogue
        self.replies += 1
        done = self.replies >= 3
        return UserTurn(text="Go on.", emotion=50.0, delta=0.0, done=done, outcome="max_turns" if done else "")

    def fingerprint(self):
        return {"model": "slow-user"}


def make_user(profile, seed):
    return SlowUser(profile, seed)
"""


@pytest.mark.parametrize("partial", [True, False])
def test_partial_rollouts_decide_whether_a_dialogue_may_span_two_versions(tiny_model_dir: Path, tmp_path: Path,
                                                                          store, partial: bool):
    """The simulated user takes 0.5 s a turn (1.5 s a dialogue), the tiny learner's update a fraction of that,
    so every weight push lands while the next step's dialogues talk. With partial rollouts they continue under
    the new weights (some dialogue holds two versions); without, the push waits and each dialogue keeps one."""
    from trainer.learning.rl_trainer import RLTrainer

    user = tmp_path / "slow_user.py"
    user.write_text(SLOW_USER)
    steps = 4
    cfg = _config(tiny_model_dir, tmp_path, max_staleness=1, steps=steps, max_turns=3, rollout_schedule="async",
                  simulator=f"python:{user}:make_user", partial_rollouts=partial)
    trainer = RLTrainer(cfg, store=store)
    try:
        history = [trainer.train_step(step) for step in range(1, steps + 1)]
    finally:
        trainer._stop_overlap()
    assert all(m["dialogues_beyond_bound"] == 0 and m["policy_lag_max"] <= 1 for m in history)
    with read_scope(store) as s:
        spans = {d.id: (d.step, [t.policy_version for t in d.turns if t.role == "assistant"])
                 for d in s.scalars(select(Dialogue))}
    assert sorted(step for step, _ in spans.values()) == [k for k in range(1, steps + 1) for _ in range(4)]
    assert all(versions and step - 1 - min(versions) <= 1 for step, versions in spans.values())
    mixed = [versions for _, versions in spans.values() if len(set(versions)) > 1]
    if partial:
        assert mixed, spans
    else:
        assert mixed == [], mixed


def test_an_older_store_gains_the_policy_version_column_and_keeps_its_rows(tmp_path: Path):
    from storage.dialogues import add_turn, start_dialogue

    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = make_store(url)
    dialogue_id = start_dialogue(store, source="train")
    add_turn(store, dialogue_id, 0, "user", "hello")
    with store.begin() as conn:  # the store as a version before policy_version (and migrations) made it
        conn.execute(text('ALTER TABLE "turn" DROP COLUMN "policy_version"'))
        conn.execute(text("DROP TABLE alembic_version"))
    store.dispose()
    upgraded = make_store(url)
    with read_scope(upgraded) as s:
        [turn] = s.scalars(select(Turn)).all()
        assert (turn.text, turn.policy_version) == ("hello", None)
    add_turn(upgraded, dialogue_id, 1, "assistant", "hi", policy_version=3)
    with read_scope(upgraded) as s:
        assert [t.policy_version for t in s.scalars(select(Turn).order_by(Turn.index))] == [None, 3]
    upgraded.dispose()


@pytest.mark.slow
@pytest.mark.process
def test_kill_9_during_an_overlapped_run_then_resume_loses_and_repeats_no_dialogue(tiny_model_dir: Path,
                                                                                 tmp_path: Path, db_url: str):
    """A real `python -m trainer train` process with max_staleness 1, killed (SIGKILL) after step 3 while the
    dialogues of step 4 are in flight; `resume` continues from the step-2 checkpoint. Every step ends with its
    4 dialogues exactly once (the in-flight ones of the lost timeline are gone), metrics once per step."""
    import os
    import signal

    from helpers import metric_steps, tiny_train_config, trainer_cli, wait_for_step

    from trainer.jobs import queue as job_queue

    steps = 5
    config = tiny_train_config(tmp_path, tiny_model_dir, steps=steps, save_every=2, max_staleness=1, max_turns=2)
    home = tmp_path / "home"
    proc = trainer_cli("train", "--config", str(config), "--db", db_url, env_home=home, start_new_session=True)
    store = make_store(db_url)
    job_id = wait_for_step(store, proc, 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with read_scope(store) as s:
        in_flight = s.scalars(select(Dialogue.step).where(Dialogue.job_id == job_id, Dialogue.step > 3)).all()
    assert in_flight, "the next step's dialogues were running when the learner reported step 3"
    from helpers import wait_for

    wait_for(lambda: job_queue.reap_dead_jobs(store) == [job_id])  # the reaper, once the dead owner's lock is free

    resumed = trainer_cli("resume", str(job_id), "--db", db_url, "--json", env_home=home)
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    assert "resumed from" in out
    for name in ("reward_mean", "policy_loss", "policy_lag_max", "learner_idle_share"):
        assert metric_steps(store, job_id, name) == list(range(1, steps + 1)), name
    with read_scope(store) as s:
        dialogues = s.scalars(select(Dialogue).where(Dialogue.job_id == job_id)).all()
        assert sorted(d.step for d in dialogues) == [k for k in range(1, steps + 1) for _ in range(4)]
        assert all(d.status == "finished" for d in dialogues)
        for d in dialogues:
            versions = [t.policy_version for t in d.turns if t.role == "assistant"]
            assert versions and d.step - 1 - min(versions) <= 1, (d.step, versions)
    store.dispose()


def test_training_view_draws_the_policy_lag_and_learner_idle_share_per_step(store):
    from app.services import training
    from storage import Metric, session_scope
    from trainer.jobs import queue as job_queue

    job_id = job_queue.create_job(store, "train", {"algorithm": "grpo", "max_staleness": 1})
    with session_scope(store) as s:  # what an overlapped run's steps report (rl_trainer.train_step)
        for step, (lag_mean, lag_max, idle) in enumerate([(0.0, 0.0, 0.9), (0.5, 1.0, 0.4)], start=1):
            for name, value in (("policy_lag_mean", lag_mean), ("policy_lag_max", lag_max),
                                ("learner_idle_share", idle), ("reward_mean", 0.3)):
                s.add(Metric(job_id=job_id, step=step, name=name, value=value))
    figure = training.overlap_figure(job_queue.job_detail(store, job_id))
    assert [t.name for t in figure.data] == ["policy_lag_mean", "policy_lag_max", "learner_idle_share"]
    assert list(figure.data[1].x) == [1, 2] and list(figure.data[1].y) == [0.0, 1.0]
    assert list(figure.data[2].y) == [0.9, 0.4]
    assert training.overlap_figure(None).layout.annotations[0].text == "no data yet"


_VLLM_RUN = r'''
import json, sys
from trainer.config import TrainConfig
from trainer.learning.rl_trainer import RLTrainer

cfg = TrainConfig(model=sys.argv[1], rollout_backend="vllm", algorithm="grpo", group_size=2, dialogues_per_step=4,
                  minibatch_size=4, micro_batch_size=2, steps=3, max_turns=2, max_new_tokens=6,
                  max_dialogue_tokens=1024, actor_lr=1e-2, max_staleness=1, save_every=0, store_dialogues=False,
                  report_to=["none"], output_dir=sys.argv[2])
trainer = RLTrainer(cfg)
steps = [trainer.train_step(step) for step in (1, 2, 3)]
trainer._stop_overlap()
versions = [v for s in trainer.last_samples for v in s.reply_versions]
out = {"lag_max": [m["policy_lag_max"] for m in steps], "beyond": [m["dialogues_beyond_bound"] for m in steps],
       "engine_version": trainer.policy_engine.policy_version, "last_versions": versions,
       "mismatch_fresh": steps[0]["logprob_mismatch"]}
trainer.policy_engine.close()
print("RESULT " + json.dumps(out), flush=True)
'''


@pytest.mark.process
@pytest.mark.slow
def test_overlapped_training_on_the_vllm_engine_pushes_weights_between_batches(tiny_model_dir: Path, tmp_path: Path):
    """vllm-cpu in a child process (see tests/test_vllm_engine.py): the learner's weights are pushed into
    vLLM after every update (collective_rpc) while the next step's dialogues run; every reply carries the
    version it was sampled with."""
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("vllm")
    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(repo) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    script = tmp_path / "vllm_overlap.py"
    script.write_text(_VLLM_RUN)
    proc = subprocess.run([sys.executable, str(script), str(tiny_model_dir), str(tmp_path / "run")], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=900)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["beyond"] == [0, 0, 0] and out["lag_max"][0] == 0 and max(out["lag_max"]) <= 1
    assert out["engine_version"] == 3  # pushed after each of the three updates
    assert out["last_versions"] and set(out["last_versions"]) <= {1, 2}  # step 3: sampled at versions 1..2
    assert out["mismatch_fresh"] < 1e-3  # vLLM's recorded log-probs are the trainer's at the same weights
