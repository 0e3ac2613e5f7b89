"""RLTrainer: the RLVER training loop.

    for step in 1..steps:
        dialogues = rollout(this step's profiles x group_size)  policy vs simulated user (rollout/dialogue_rollout.py)
        reward    = rlver_reward(dialogue)                         max(final emotion / 100, 0) (+ shaping, off)
        update    = Learner.update(batch)                          advantages + clipped minibatch updates
        metrics   -> the job (store) and stdout
        every save_every steps: an atomic checkpoint (HF folders + optimizer / scheduler / RNG state)

`RLTrainer(config, store=the store, job=JobContext).train()` runs inside a job process
(`python -m trainer train|resume|job`, all through trainer.job_runner); under the `deepspeed` launcher
every rank runs the same loop on its share of the profiles and rank 0 reports. A resumed run (the job's
last checkpoint, or `resume_from`) continues at the step after the checkpoint with the same weights,
optimizer, scheduler, RNG and profile order, so no step is lost or repeated.
"""
from __future__ import annotations

import asyncio
import copy
import random
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Coroutine, Optional

import numpy as np
import torch

from simulator.access import LAB_ITSELF
from simulator.llm.traffic import snapshot, traffic_text
from storage import code_version, lab_home
from trainer.config import ConfigError, TrainConfig
from trainer.learning import algorithms
from trainer.learning.checkpoints import clean_partial, load_checkpoint, prune_checkpoints, save_checkpoint
from trainer.learning.distributed import all_gather_objects, barrier, broadcast_object, init_distributed, is_main
from trainer.learning.learner import Learner, make_batch
from trainer.learning.overlap import version_lag, within_bound
from trainer.learning.step_metrics import dialogue_summary, lost_dialogue, rollout_metrics
from trainer.learning.tracking import Tracking, make_tracking
from trainer.policies.spec import PolicySpec
from trainer.policies.versioned import VersionedEngine
from trainer.rollout.cancel_watch import watch_cancel

SIMULATOR_OUTAGE_FRACTION = 0.5  # more than this share of a step's dialogues lost to simulator errors fails the job


class SimulatorOutage(RuntimeError):
    """Too many dialogues of a step failed on the simulator side to train on the rest."""


def training_personas(config: TrainConfig, store: Any = None) -> list:
    """The profiles of config.persona_set (simulator.personas.specs; the store's for ids); ConfigError if none."""
    from simulator.personas.specs import PersonaSpecError, resolve_personas

    try:
        return resolve_personas(config.persona_set, store)
    except PersonaSpecError as exc:
        raise ConfigError({"persona_set": str(exc)}) from None


def _device(config: TrainConfig) -> str:
    if config.device != "auto":
        return config.device
    if torch.cuda.is_available():
        import os

        return f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    return "cpu"


class RLTrainer:
    def __init__(self, config: TrainConfig, store: Any = None, job: Any = None,
                 resume_from: Optional[str | Path] = None):
        self.config = config.validate()
        self.store, self.job = store, job
        self.rank, self.world_size = init_distributed(config.zero_stage)
        self._seed_everything(config.seed + self.rank)
        self.output_dir = Path(config.output_dir or (job.output_dir if job is not None else
                                                     lab_home() / "runs" / datetime.now().strftime("%Y%m%d-%H%M%S")))
        self.checkpoint_root = self.output_dir / "checkpoints"
        clean_partial(self.checkpoint_root)
        self.profiles = training_personas(config, store)  # before the (slow) model load: fail fast
        if job is not None and is_main():  # the set and its content hash as this run found them
            from simulator.personas.specs import spec_record

            job.record_config("personas", spec_record(config.persona_set, self.profiles))
        self.reward_fn = self._reward_function(job)
        if is_main():
            self.output_dir.mkdir(parents=True, exist_ok=True)
            config.to_yaml(self.output_dir / "train_config.yaml")
        resume = resume_from or (job.resume_from if job is not None else None)
        self.base_model = PolicySpec(config.model).local_model()
        policy_path = Path(resume) / "policy" if resume and not config.lora else self.base_model
        critic_path = Path(resume) / "critic" if resume and config.algorithm == "ppo" else None
        self.learner = Learner(config, policy_path, critic_path, reference_path=self.base_model,
                               device=_device(config))
        self.start_step, self.last_checkpoint = 0, None
        if resume:
            state = load_checkpoint(self.learner, Path(resume))
            self.start_step, self.last_checkpoint = int(state["step"]), str(resume)
            self._forget_steps_after(self.start_step)
            self._log(f"resumed from {resume} at step {self.start_step}")
        self.policy_engine = self._make_policy_engine(policy_path)
        self.rollout = self._make_rollout()
        self.overlap: Any = None  # learning.overlap.OverlappedRollouts, started by the first step (max_staleness)
        self.last_metrics: dict[str, float] = {}
        self.last_samples: list = []  # this rank's dialogues of the last step
        self.last_rewards: list[float] = []  # and their rewards
        self.tracking = Tracking([])  # set by train(): TensorBoard and the report_to trackers

    # ----------------------------------------------------------------------------------------- set-up
    @staticmethod
    def _seed_everything(seed: int) -> None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)

    def _make_policy_engine(self, policy_path: Path) -> Any:
        if self.config.rollout_backend == "vllm":
            engine = PolicySpec(f"vllm:{self.base_model}", access=LAB_ITSELF).build(
                max_model_len=self.config.max_dialogue_tokens, seed=self.config.seed)
            engine.load_weights(self.learner.stream_policy_weights(self.config.weight_bucket_mb << 20))
            return VersionedEngine(engine, self.start_step)
        # max_staleness 0 shares the training weights: every step samples from the policy being trained;
        # overlapped training samples from a copy, refreshed after each update (trainer.policies.versioned)
        model = self.learner.generation_model()
        if self.config.max_staleness:
            model = copy.deepcopy(self.learner.merged_policy()).eval().requires_grad_(False)
        # ZeRO-3 gathers the weights anew for every call: no fixed addresses for the static path's graph;
        # one-reply dialogues have no later turn to keep a KV cache for
        engine = PolicySpec(str(policy_path), access=LAB_ITSELF).build(
            device=_device(self.config), model=model, tokenizer=self.learner.tokenizer,
            decode="generate" if self.config.zero_stage == 3 else "auto",
            **({"keep_kv": 0} if self.config.max_turns <= 1 else {}))
        if self.config.zero_stage == 3:
            engine.generate_ids = _with_gathered_weights(engine.generate_ids, self.learner.generation_model())
        return VersionedEngine(engine, self.start_step)

    def _make_rollout(self) -> Any:
        from simulator.user.spec import SimulatorSpec
        from storage.recorder import DialogueRecorder
        from trainer.rollout.build import build_rollout
        from trainer.rollout.types import RolloutConfig

        c = self.config
        rollout_cfg = RolloutConfig(mode=c.mode, max_turns=c.max_turns, max_new_tokens=c.max_new_tokens,
                                    max_tokens=c.max_dialogue_tokens, temperature=c.temperature, top_p=c.top_p,
                                    seed=c.seed, source="train", shared_opening=c.shared_opening,
                                    schedule=c.rollout_schedule, job_id=getattr(self.job, "job_id", None))
        recorder = DialogueRecorder(self.store) if c.store_dialogues and self.store is not None else None
        return build_rollout(self.policy_engine, SimulatorSpec.from_config(c), rollout_cfg, recorder=recorder)

    def _forget_steps_after(self, step: int) -> None:
        """Metrics and dialogues a killed run wrote after its last checkpoint belong to a lost timeline:
        drop them, so every step of the job appears exactly once."""
        if self.store is None or self.job is None or not is_main():
            return
        from sqlalchemy import delete

        from storage import Dialogue, Metric, session_scope

        with session_scope(self.store) as s:
            s.execute(delete(Metric).where(Metric.job_id == self.job.job_id, Metric.step > step))
            s.execute(delete(Dialogue).where(Dialogue.job_id == self.job.job_id, Dialogue.step > step))

    # ------------------------------------------------------------------------------------------- steps
    def profiles_for_step(self, step: int) -> list:
        """This rank's profiles at `step`: the persona set in a seeded order per epoch, without repeats
        inside an epoch; a function of (seed, step) only, so a resumed run picks the same ones."""
        n, per_step = len(self.profiles), self.config.profiles_per_step
        chosen = []
        for k in range((step - 1) * per_step, step * per_step):
            epoch, pos = divmod(k, n)
            order = np.random.default_rng(self.config.seed * 1_000_003 + epoch).permutation(n)
            chosen.append(self.profiles[order[pos]])
        return chosen[self.rank::self.world_size]

    def _rollout(self, step: int) -> list:
        """Run this rank's dialogues of the step; a Cancel of the job stops them. Overlapped training
        (max_staleness >= 1) collects the step's dialogues, started earlier, from trainer.learning.overlap."""
        if self.config.max_staleness:
            if self.overlap is None:
                self.overlap = self._start_overlap(step - 1)
            self.last_samples = self.overlap.collect(step)
            return self.last_samples
        end_watch = watch_cancel(self.job, self.rollout.cancel)
        try:
            self.last_samples = asyncio.run(self._step_dialogues(step))
            return self.last_samples
        finally:
            end_watch()

    def _step_dialogues(self, step: int) -> Coroutine[Any, Any, list]:
        """The rollout of this rank's dialogues of `step` (profiles and seed are functions of the step)."""
        return self.rollout.arun(self.profiles_for_step(step), self.config.effective_group_size,
                                 seed=self.config.seed * 1_000_003 + step, step=step)

    def _start_overlap(self, version: int) -> Any:
        from trainer.learning.overlap import OverlappedRollouts

        self._end_cancel_watch = watch_cancel(self.job, self.rollout.cancel)  # for the whole run
        return OverlappedRollouts(self._step_dialogues, self.config.max_staleness, self.config.steps, version,
                                  self.rollout.cancel)

    def _stop_overlap(self) -> None:
        if self.overlap is not None:
            self.overlap.close()
            self._end_cancel_watch()
            self.overlap = None

    def _publish_weights(self, version: int) -> tuple[float, float]:
        """Give the sampling engine the weights after update `version`; returns (seconds the copy took,
        seconds waited for the dialogues in flight first: partial_rollouts off)."""
        engine = self.policy_engine
        if self.config.rollout_backend != "vllm" and not self.config.max_staleness:
            engine.set_version(version)  # shared weights: nothing to copy
            return 0.0, 0.0
        t0 = time.monotonic()
        if self.overlap is not None and not self.config.partial_rollouts:
            self.overlap.wait_in_flight()  # every dialogue ends on the weights it began with
        waited = time.monotonic() - t0
        weights = self.learner.stream_policy_weights(self.config.weight_bucket_mb << 20)
        seconds = engine.push_weights(weights, version)
        if self.overlap is not None:
            self.overlap.admit(version)
        return seconds, waited

    def _cancelled(self) -> bool:
        """The job's Cancel flag, as rank 0 sees it (every rank stops at the same point)."""
        flag = bool(self.job is not None and self.job.cancelled)
        return bool(broadcast_object(flag)) if self.world_size > 1 else flag

    def reward_config(self) -> algorithms.RewardConfig:
        """The reward's settings: the paper's reward unless shaping is configured (deviations)."""
        c = self.config
        return algorithms.RewardConfig(turn_delta_coef=c.reward_turn_delta_coef, length_penalty=c.reward_length_penalty,
                                       length_target=c.reward_length_target)

    def _reward_function(self, job: Any) -> Callable[[Any], float | list[float]]:
        """The dialogue reward: the paper's (with any configured shaping), per-turn credit from emotion
        changes, or outside code named by `reward: python:...`, whose source (module, file hash) is recorded
        with the job. A list is one reward per policy turn (the dialogue's score is its sum)."""
        if self.config.reward == "final_emotion":
            reward_config = self.reward_config()
            return lambda sample: algorithms.rlver_reward(sample, reward_config)
        if self.config.reward == "emotion_deltas":
            return algorithms.emotion_delta_rewards
        from simulator.user.outside import load

        fn, origin = load(self.config.reward)
        if job is not None and is_main():
            job.record_config("reward_source", origin)

        def outside(sample: Any) -> float | list[float]:
            value = fn(sample)
            return [float(v) for v in value] if isinstance(value, (list, tuple)) else float(value)

        return outside

    def train_step(self, step: int) -> dict[str, float]:
        """One rollout + update; returns the step's metrics (the same on every rank)."""
        t0 = time.monotonic()
        samples = self._rollout(step)
        t_rollout = time.monotonic() - t0
        samples, beyond = within_bound(samples, step - 1, self.config.max_staleness)
        self.last_samples = samples
        raw = [self.reward_fn(s) for s in samples]
        per_turn = [r if isinstance(r, list) else None for r in raw]
        rewards = [sum(r) if isinstance(r, list) else r for r in raw]
        self.last_rewards = rewards
        lost = [lost_dialogue(s) for s in samples]
        usable = [(s, r) for s, r, gone in zip(samples, rewards, lost) if not gone]
        usable_turns = [t for t, gone in zip(per_turn, lost) if not gone]
        summaries = [x for part in all_gather_objects([dialogue_summary(s, r) for s, r in zip(samples, rewards)])
                     for x in part]
        n_lost = sum(1 for x in summaries if x["lost"])
        if self._cancelled():
            return {}
        if n_lost > SIMULATOR_OUTAGE_FRACTION * len(summaries):
            first = next(x["error"] for x in summaries if x["lost"])
            raise SimulatorOutage(f"step {step}: {n_lost} of {len(summaries)} dialogues failed on the simulator "
                                  f"side, e.g. {first}")
        t1 = time.monotonic()
        turn_rewards = None
        if any(t is not None for t in usable_turns):  # per-turn credit: a scalar goes on the last turn
            turn_rewards = [t if t is not None else [0.0] * (len(s.turn_spans) - 1) + [r]
                            for t, (s, r) in zip(usable_turns, usable)]
        batch = make_batch([s for s, _ in usable], self.learner.tokenizer.pad_token_id,
                           rewards=[r for _, r in usable], turn_rewards=turn_rewards)
        if not self.config.max_staleness:  # the engine samples from these weights: its kept caches go now
            self.policy_engine.forget_caches()
        metrics = self.learner.update(batch, seed=self.config.seed * 1_000_003 + step, policy_version=step - 1)
        t_update = time.monotonic() - t1
        t_sync, t_waited = self._publish_weights(step)
        metrics.update(rollout_metrics(summaries, think=self.config.mode == "think"))
        t_idle = t_rollout + t_waited
        metrics.update(version_lag([s for s, _ in usable], step - 1), dialogues_beyond_bound=float(len(beyond)),
                       weight_sync_s=t_sync, learner_busy_s=t_update, learner_idle_s=t_idle,
                       learner_idle_share=t_idle / max(time.monotonic() - t0, 1e-9))
        n_tokens = sum(x["reply_tokens"] for x in summaries)
        if self.overlap is not None:  # the step's dialogues ran longer than the learner waited for them
            t_rollout = self.overlap.rollout_s.pop(step, t_rollout)
        metrics.update(rollout_s=t_rollout, update_s=t_update, step_s=time.monotonic() - t0,
                       tokens_per_s=n_tokens / max(t_rollout, 1e-9), dialogues=float(len(summaries)),
                       dialogues_lost=float(n_lost))
        return metrics

    # -------------------------------------------------------------------------------------------- train
    def train(self) -> dict[str, Any]:
        """Run from the step after the last checkpoint to config.steps; return a summary
        {steps, metrics, checkpoint, output_dir}."""
        c, step = self.config, self.start_step
        self._log(f"training {c.algorithm} ({c.mode}) on {len(self.profiles)} profiles, steps "
                  f"{self.start_step + 1}..{c.steps}, {self.world_size} rank(s), output {self.output_dir}")
        self.tracking = self._make_tracking()
        try:
            step = self._train_steps()
        finally:
            self._stop_overlap()
            self.tracking.close()
        barrier()  # no rank leaves with a collective still in flight (see distributed.barrier)
        return {"steps": step, "metrics": self.last_metrics, "checkpoint": self.last_checkpoint,
                "output_dir": str(self.output_dir)}

    def _make_tracking(self) -> Tracking:
        c = self.config
        if not is_main() or c.report_to == ["none"]:
            return Tracking([])
        name = f"job-{self.job.job_id}" if self.job is not None else self.output_dir.name
        return make_tracking(c.report_to, self.output_dir, name, c.to_dict(), self.start_step)

    def _train_steps(self) -> int:
        c, step = self.config, self.start_step
        for step in range(self.start_step + 1, c.steps + 1):
            if self._cancelled():
                step -= 1
                break
            metrics = self.train_step(step)
            if not metrics:  # cancelled during the rollout: the step is not trained nor counted
                step -= 1
                break
            self.last_metrics = metrics
            if is_main():
                self._report(step, metrics)
            if (c.save_every and step % c.save_every == 0) or step == c.steps:
                self.save(step)
        return step

    def save(self, step: int) -> str:
        """Write the step's checkpoint, record it in the job, and only then prune older ones."""
        if is_main() and hasattr(self.job, "check_owner"):
            self.job.check_owner()  # a process that lost its job writes no files into the job's folder
        path = save_checkpoint(self.learner, self.checkpoint_root, step,
                               extra={"metrics": self.last_metrics, "code_version": code_version()})
        self.last_checkpoint = str(path)
        if is_main():
            if self.job is not None:
                self.job.add_checkpoint(step, str(path), {k: self.last_metrics[k] for k in
                                                          ("reward_mean", "final_emotion_mean")
                                                          if k in self.last_metrics})
            pruned = prune_checkpoints(self.checkpoint_root, self.config.keep_checkpoints)
            if pruned and hasattr(self.job, "forget_checkpoints"):
                self.job.forget_checkpoints([str(p) for p in pruned])
            self._log(f"step {step}: checkpoint {path}")
        return str(path)

    def _report(self, step: int, metrics: dict[str, float]) -> None:
        if self.job is not None:
            self.job.log_metrics(step, metrics)
            self.job.progress(step, self.config.steps)
        self.tracking.log_step(step, metrics, self.last_samples, self.last_rewards)
        keys = ("reward_mean", "final_emotion_mean", "success_rate", "policy_loss", "approx_kl", "entropy",
                "grad_norm", "step_s")
        traffic = traffic_text(snapshot())  # an openai simulator's endpoint, '' for the offline one
        self._log(f"step {step}/{self.config.steps} " + " ".join(
            f"{k}={metrics[k]:.4g}" for k in keys if k in metrics) + (f" | API {traffic}" if traffic else ""))

    def _log(self, text: str) -> None:
        if is_main():
            print(text, flush=True)


def _with_gathered_weights(generate: Any, model: torch.nn.Module) -> Any:
    """ZeRO-3 partitions the weights; gather them (outside inference mode) for the whole generation."""
    import deepspeed

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with deepspeed.zero.GatheredParameters(list(model.parameters())):
            return generate(*args, **kwargs)

    return wrapped
