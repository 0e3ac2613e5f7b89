"""The RL update and the training loop on the tiny model: learning a verifiable reward, checkpoints, resume."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from trainer.config import TrainConfig
from trainer.jobs.context import JobContext
from trainer.learning.learner import Learner, make_batch

PROMPTS = ["hello there", "I feel sad today", "my work is hard", "thank you"]


def _even_token_samples(engine, step: int, group: int) -> list[dict]:
    """Single-turn rollouts scored by a verifiable rule: the fraction of reply tokens with an even id."""
    from trainer.policies.base import SamplingConfig

    prompt_ids = [engine.encode_chat([{"role": "user", "content": p}]) for p in PROMPTS for _ in range(group)]
    gens = engine.generate_ids(prompt_ids, SamplingConfig(temperature=1.0, max_new_tokens=4, seed=step))
    samples = []
    for i, g in enumerate(gens):
        samples.append({"input_ids": g.prompt_ids + g.token_ids,
                        "action_mask": [0] * len(g.prompt_ids) + [1] * len(g.token_ids),
                        "reward": sum(t % 2 == 0 for t in g.token_ids) / len(g.token_ids), "group_id": i // group})
    return samples


def test_make_batch_pads_and_shifts_the_action_mask():
    b = make_batch([{"input_ids": [5, 6, 7], "action_mask": [0, 1, 1], "reward": 0.5, "group_id": 0},
                    {"input_ids": [5, 8], "action_mask": [0, 1], "reward": 1.0, "group_id": 0}], pad_token_id=0)
    assert b.input_ids.tolist() == [[5, 6, 7], [5, 8, 0]]
    assert b.attention_mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert b.action_mask.tolist() == [[1, 1], [1, 0]]  # predicts tokens 1..T-1
    with pytest.raises(ValueError, match="differ in length"):
        make_batch([{"input_ids": [1, 2], "action_mask": [1], "reward": 0, "group_id": 0}], 0)


@pytest.mark.parametrize("algorithm", ["grpo"])
def test_tiny_model_learns_a_verifiable_reward(tiny_model_dir: Path, algorithm: str):
    from trainer.policies.hf_engine import HFEngine

    torch.manual_seed(0)
    cfg = TrainConfig(model=str(tiny_model_dir), algorithm=algorithm, dialogues_per_step=16, group_size=4,
                      minibatch_size=16, micro_batch_size=16, actor_lr=1e-2, entropy_coef=0.0, steps=20)
    learner = Learner(cfg, tiny_model_dir)
    engine = HFEngine(tiny_model_dir, model=learner.generation_model(), tokenizer=learner.tokenizer)
    rewards, kls = [], []
    for step in range(20):
        batch = make_batch(_even_token_samples(engine, step, 4), learner.tokenizer.pad_token_id)
        metrics = learner.update(batch, seed=step)
        rewards.append(batch.scores.mean().item())
        kls.append(metrics["approx_kl"])
    # one update per batch: the recomputed old log-probs equal the new ones, so the ratio starts at 1
    assert max(kls) < 1e-5
    assert sum(rewards[:3]) / 3 < 0.65
    assert sum(rewards[-3:]) / 3 > 0.85, rewards


def test_logprobs_at_policy_positions_equal_the_full_computation(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM

    cfg = TrainConfig(model=str(tiny_model_dir), algorithm="grpo", temperature=0.7)
    learner = Learner(cfg, tiny_model_dir)
    batch = make_batch([{"input_ids": [5, 6, 7, 8, 9, 10], "action_mask": [0, 0, 1, 1, 0, 1], "reward": 1.0,
                         "group_id": 0},
                        {"input_ids": [11, 12, 13, 14], "action_mask": [0, 1, 1, 0], "reward": 0.0,
                         "group_id": 0}], pad_token_id=0)
    with torch.no_grad():
        lp, ent = learner._logprobs(learner.policy, batch.input_ids, batch.attention_mask, batch.action_mask,
                                    with_entropy=True)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
        full = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1] / 0.7
        expected = torch.log_softmax(full, -1).gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
    on = batch.action_mask.bool()
    torch.testing.assert_close(lp[on], expected[on], atol=1e-5, rtol=1e-5)
    assert torch.all(ent[on] > 0)


@pytest.mark.parametrize("algorithm, extra", [("ppo", {}), ("grpo", {"kl_coef": 0.1}), ("rloo", {}),
                                              ("reinforce_pp", {"ppo_epochs": 2, "minibatch_size": 4})])
def test_every_algorithm_updates_and_reports_its_metrics(tiny_model_dir: Path, algorithm: str, extra: dict):
    cfg = TrainConfig(model=str(tiny_model_dir), algorithm=algorithm, dialogues_per_step=8, group_size=4,
                      minibatch_size=extra.pop("minibatch_size", 8), micro_batch_size=4, actor_lr=1e-2,
                      critic_lr=1e-2, **extra)
    learner = Learner(cfg, tiny_model_dir)
    samples = [{"input_ids": [5 + i, 7, 9 + i, 11, 13], "action_mask": [0, 0, 1, 1, 1], "reward": 0.1 * i,
                "group_id": i // 4} for i in range(8)]
    before = {n: p.detach().clone() for n, p in learner.policy.module.named_parameters()}
    m = learner.update(make_batch(samples, 0))
    after = dict(learner.policy.module.named_parameters())
    assert any(not torch.equal(before[n], after[n]) for n in before)  # the policy moved
    assert m["updates"] == cfg.ppo_epochs * (cfg.dialogues_per_step // cfg.minibatch_size)
    assert ("value_loss" in m) == (algorithm == "ppo")
    assert ("kl_ref" in m) == (cfg.kl_coef > 0)
    if algorithm == "grpo":
        assert m["kl_ref"] >= 0.0 and abs(m["advantage_mean"]) < 1e-6  # group-normalised
    if cfg.ppo_epochs > 1:
        assert m["approx_kl"] > 0.0  # the second epoch sees a moved policy


def test_warmup_ratios_reach_the_actor_and_critic_schedulers(tiny_model_dir: Path):
    """PPO with the paper's ratios over 100 updates: the actor warms up over 2 updates, the critic over 5."""
    cfg = TrainConfig(model=str(tiny_model_dir), algorithm="ppo", steps=100, dialogues_per_step=4,
                      minibatch_size=4, micro_batch_size=4, actor_lr=1e-3, critic_lr=1e-2,
                      actor_warmup_ratio=0.02, critic_warmup_ratio=0.05)
    learner = Learner(cfg, tiny_model_dir)
    actor, critic = [], []
    for _ in range(6):
        actor.append(learner.policy.lr())
        critic.append(learner.critic.lr())
        for opt in (learner.policy, learner.critic):  # no gradients: the weights stay, the schedule moves on
            opt.optimizer.step()
            opt.scheduler.step()
    assert actor == pytest.approx([5e-4, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3])
    assert critic == pytest.approx([2e-3, 4e-3, 6e-3, 8e-3, 1e-2, 1e-2])


# ------------------------------------------------------------------------------------------ the loop
def _loop_config(model: Path, tmp_path: Path, **changes) -> TrainConfig:
    base = dict(model=str(model), algorithm="ppo", dialogues_per_step=4, minibatch_size=2, micro_batch_size=1,
                steps=3, max_turns=2, max_new_tokens=6, max_dialogue_tokens=1024, save_every=1,
                keep_checkpoints=0, actor_lr=1e-3, critic_lr=1e-3, output_dir=str(tmp_path / "run"))
    base.update(changes)
    return TrainConfig(**base)


@pytest.mark.model
@pytest.mark.parametrize("changes", [{}, {"algorithm": "rloo", "group_size": 2, "lora": True, "lora_r": 4}])
def test_resume_from_a_checkpoint_repeats_the_run_exactly(tiny_model_dir: Path, tmp_path: Path, changes):
    from trainer.learning.rl_trainer import RLTrainer

    cfg = _loop_config(tiny_model_dir, tmp_path, store_dialogues=False, **changes)
    first = RLTrainer(cfg)
    first.save(0)
    history = {step: first.train_step(step) for step in (1, 2, 3)}
    # a fresh trainer resumed from the step-0 checkpoint replays steps 1..3 with identical numbers
    again = RLTrainer(cfg, resume_from=tmp_path / "run" / "checkpoints" / "step-000000")
    assert again.start_step == 0
    for step in (1, 2, 3):
        m = again.train_step(step)
        for key in ("reward_mean", "policy_loss", "entropy", "grad_norm", "approx_kl"):
            assert m[key] == history[step][key], (step, key)


@pytest.mark.model
def test_think_mode_trains_on_per_turn_segments(tiny_model_dir: Path, tmp_path: Path, store):
    from trainer.learning.rl_trainer import RLTrainer

    cfg = _loop_config(tiny_model_dir, tmp_path, algorithm="grpo", group_size=2, mode="think", steps=1,
                       max_new_tokens=12)
    result = RLTrainer(cfg, store=store).train()
    assert result["steps"] == 1 and result["metrics"]["dialogues"] == 4
    assert result["metrics"]["logprob_mismatch"] < 1e-3  # recomputed on the sampled ids, not re-tokenised text
    assert 0.0 <= result["metrics"]["think_format_rate"] <= 1.0


def test_think_format_rate_counts_dialogues_with_a_well_formed_think_block_in_every_reply():
    from trainer.learning.step_metrics import rollout_metrics

    def summary(ok: bool, lost: bool = False):
        return {"reward": 0.4, "final": 40.0, "outcome": "max_turns", "lost": lost, "error": "", "turns": 2,
                "reply_tokens": 10, "failed": False, "format_ok": ok}

    rows = [summary(True), summary(False), summary(False), summary(True, lost=True)]
    assert rollout_metrics(rows, think=True)["think_format_rate"] == 1 / 3  # lost dialogues are not counted
    assert "think_format_rate" not in rollout_metrics(rows)  # direct mode has no think block to check


def _job(store, cfg: TrainConfig):
    from trainer.jobs import queue as job_queue

    job_id = job_queue.create_job(store, "train", cfg.to_dict())
    return job_id, JobContext(store, job_id, install_signals=False)


@pytest.mark.model
def test_failed_checkpoint_write_marks_the_job_and_keeps_the_last_good_one(tiny_model_dir: Path, tmp_path: Path,
                                                                           store, monkeypatch):
    import errno

    from storage import Job, read_scope
    from trainer.learning import checkpoints
    from trainer.learning.rl_trainer import RLTrainer

    cfg = _loop_config(tiny_model_dir, tmp_path)
    job_id, ctx = _job(store, cfg)
    real_save = torch.save

    def disk_full_at_step_2(obj, path, *a, **kw):
        if "step-000002" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, path, *a, **kw)

    monkeypatch.setattr(checkpoints.torch, "save", disk_full_at_step_2)
    with pytest.raises(checkpoints.CheckpointError):
        with ctx:
            RLTrainer(cfg, store=store, job=ctx).train()
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        assert job.status == "failed" and "No space left on device" in job.error and "step 2" in job.error
    root = tmp_path / "run" / "checkpoints"
    assert [p.name for p in checkpoints.list_checkpoints(root)] == ["step-000001"]
    assert not [p for p in root.iterdir() if p.name.startswith(".")]  # no half-written folder left
    monkeypatch.setattr(checkpoints.torch, "save", real_save)
    # the good checkpoint still loads and training resumes from it
    resumed = RLTrainer(cfg, resume_from=root / "step-000001")
    assert resumed.start_step == 1


@pytest.mark.model
def test_cancel_during_a_checkpoint_write_finishes_the_write(tiny_model_dir: Path, tmp_path: Path, store,
                                                             monkeypatch):
    from storage import Job, read_scope
    from trainer.jobs import queue as job_queue
    from trainer.learning import checkpoints
    from trainer.learning.rl_trainer import RLTrainer

    cfg = _loop_config(tiny_model_dir, tmp_path)
    job_id, ctx = _job(store, cfg)
    real_write = checkpoints._write

    def cancel_mid_write(*args, **kw):
        ctx.request_cancel()  # what SIGTERM does
        return real_write(*args, **kw)

    monkeypatch.setattr(checkpoints, "_write", cancel_mid_write)
    with ctx:
        result = RLTrainer(cfg, store=store, job=ctx).train()
    assert result["steps"] == 1
    with read_scope(store) as s:
        assert s.get(Job, job_id).status == "cancelled"
    assert job_queue.last_checkpoint(store, job_id)["step"] == 1
    assert (tmp_path / "run" / "checkpoints" / "step-000001" / "trainer_state.pt").exists()


def test_simulator_outage_fails_the_job_with_the_reason(tiny_model_dir: Path, tmp_path: Path, store,
                                                        monkeypatch):
    import socket

    from storage import Job, read_scope
    from trainer.learning.rl_trainer import RLTrainer, SimulatorOutage

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    cfg = _loop_config(tiny_model_dir, tmp_path, simulator="openai:sim", steps=1,
                       simulator_base_url=f"http://127.0.0.1:{port}/v1")
    job_id, ctx = _job(store, cfg)
    with pytest.raises(SimulatorOutage):
        with ctx:
            RLTrainer(cfg, store=store, job=ctx).train()
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        assert job.status == "failed" and "dialogues failed on the simulator side" in job.error
    assert not (tmp_path / "run" / "checkpoints").exists() or not list((tmp_path / "run" / "checkpoints").iterdir())


@pytest.mark.model
def test_checkpoint_is_recorded_before_older_ones_are_pruned_and_pruned_rows_go(tiny_model_dir: Path, tmp_path: Path,
                                                                               store):
    """keep_checkpoints=1: a kill between writing step N and recording it must leave step N-1 on disk, so
    at every record the previous folder still exists; afterwards only the kept checkpoint is listed."""
    from trainer.jobs import queue as job_queue
    from trainer.learning import checkpoints
    from trainer.learning.rl_trainer import RLTrainer

    cfg = _loop_config(tiny_model_dir, tmp_path, keep_checkpoints=1, store_dialogues=False)
    job_id, ctx = _job(store, cfg)
    root = tmp_path / "run" / "checkpoints"
    on_disk_at_record = []
    real_add = ctx.add_checkpoint

    def add_checkpoint(step, path, metrics=None):
        on_disk_at_record.append((step, [p.name for p in checkpoints.list_checkpoints(root)]))
        real_add(step, path, metrics)

    ctx.add_checkpoint = add_checkpoint
    with ctx:
        RLTrainer(cfg, store=store, job=ctx).train()
    assert on_disk_at_record == [(1, ["step-000001"]), (2, ["step-000001", "step-000002"]),
                                 (3, ["step-000002", "step-000003"])]
    assert [c["step"] for c in job_queue.job_detail(store, job_id)["checkpoints"]] == [3]
    assert [p.name for p in checkpoints.list_checkpoints(root)] == ["step-000003"]


def test_persona_set_is_resolved_with_the_store_first(store):
    """Ids in a config's list are the store's profiles, else the built-in ones; an unknown id fails before
    any model is loaded, naming persona_set."""
    from simulator.personas.store import save_profile
    from tests.conftest import make_sim_profile
    from trainer.config import ConfigError
    from trainer.learning.rl_trainer import training_personas

    save_profile(store, make_sim_profile("mia"), create=True)
    found = training_personas(TrainConfig(persona_set=["mia", "en-20-ahmed-yilmaz"]), store)
    assert [p.id for p in found] == ["mia", "en-20-ahmed-yilmaz"]
    assert len(training_personas(TrainConfig(persona_set="builtin:heldout"))) == 8
    with pytest.raises(ConfigError) as info:
        training_personas(TrainConfig(persona_set=["mia", "nobody"]))  # no store: mia is unknown too
    assert "unknown persona id(s): mia, nobody" in info.value.errors["persona_set"]


@pytest.mark.model
def test_the_engines_kept_caches_are_dropped_before_the_update(tiny_model_dir: Path, tmp_path: Path):
    """The transformers engine keeps each dialogue's KV cache between turns; an update of the weights it shares
    would make them stale, so the trainer drops them first: none sits beside the learner's activations."""
    from trainer.learning.rl_trainer import RLTrainer

    trainer = RLTrainer(_loop_config(tiny_model_dir, tmp_path, store_dialogues=False, max_turns=2))
    kept = trainer.policy_engine.inner.kept
    seen: dict[str, int] = {}
    real_forget, real_update = trainer.policy_engine.forget_caches, trainer.learner.update

    def forget() -> None:
        seen["before_forget"] = len(kept._kept)
        real_forget()

    def update(*args, **kwargs):
        seen["during_update"] = len(kept._kept)
        return real_update(*args, **kwargs)

    trainer.policy_engine.forget_caches, trainer.learner.update = forget, update
    trainer.train_step(1)
    assert seen["before_forget"] > 0 and seen["during_update"] == 0
    one_reply = RLTrainer(_loop_config(tiny_model_dir, tmp_path / "one", store_dialogues=False, max_turns=1))
    assert one_reply.policy_engine.inner.kept.max_kept == 0  # no later turn to keep a cache for
