"""Time per training step on CPU, measured with a small real step of the config (the plan's seconds_per_step).

The probe keeps every setting of the config (model, turns, tokens, micro-batch, LoRA, epochs, simulator)
and trains fewer dialogues: the smallest batch that is a whole number of groups and micro-batches, with two
minibatches when the config takes several optimizer steps per batch (one minibatch would let the learner
skip its old-log-prob pass, a saving the full step does not get). It runs two steps: the first loads what
loads lazily (the simulator's judge models, kernels) and is not timed; the second is. The time is scaled
linearly by dialogues_per_step / probe dialogues: per-dialogue work (simulator turns, forward/backward per
micro-batch) is linear, while batched generation is sublinear, so the scaled figure leans high.
It also reports the memory the steps added to the process (its peak resident size during the steps less
its size once the models were loaded): activations, optimizer states, rollout caches. The micro-batch is
the config's, so this is what a full step adds too (in a process that ran nothing bigger before).
"""
from __future__ import annotations

import math
import resource
import tempfile
import time
from dataclasses import dataclass, replace

from trainer.config import TrainConfig


@dataclass
class ProbeResult:
    seconds_per_step: float
    probe_seconds: float
    probe_dialogues: int
    scale: float
    note: str
    step_memory_bytes: int  # peak resident size during the steps less the size before them
    threads: int = 0  # torch's intra-op threads during the timed step
    load_during: float = 0.0  # the machine's 1-minute load average right after the timed step


def _rss_bytes() -> int:
    """This process's resident size now (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def probe_config(config: TrainConfig) -> TrainConfig:
    """The config with a smaller batch (see the module docstring); the config itself when it is small."""
    base = math.lcm(config.effective_group_size, config.micro_batch_size)
    several = config.ppo_epochs > 1 or config.dialogues_per_step // config.minibatch_size > 1
    dialogues, minibatch = (2 * base, base) if several else (base, base)
    if dialogues >= config.dialogues_per_step:
        dialogues, minibatch = config.dialogues_per_step, config.minibatch_size
    return replace(config, dialogues_per_step=dialogues, minibatch_size=minibatch, steps=2, save_every=0,
                   store_dialogues=False, report_to=["none"], output_dir="")


def measure_seconds_per_step(config: TrainConfig) -> ProbeResult:
    """Train two small steps of the config in this process and time the second (RuntimeError/OSError/
    ValueError from the trainer propagate: the caller reports them)."""
    from trainer.learning.rl_trainer import RLTrainer

    small = probe_config(config)
    with tempfile.TemporaryDirectory(prefix="plan-probe-") as out:
        trainer = RLTrainer(replace(small, output_dir=out))
        try:
            before = _rss_bytes()
            trainer.train_step(1)  # warm-up: lazy loading, first-call costs
            t0 = time.monotonic()
            trainer.train_step(2)
            seconds = time.monotonic() - t0
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        finally:
            close = getattr(trainer.policy_engine, "close", None)
            if close:
                close()
            del trainer
    scale = config.dialogues_per_step / small.dialogues_per_step
    note = (f"seconds_per_step: one real step of {small.dialogues_per_step} dialogue(s) (minibatch "
            f"{small.minibatch_size}, micro-batch {small.micro_batch_size}, {config.max_turns} turn(s), "
            f"{config.max_new_tokens} new tokens) took {seconds:.1f} s after a warm-up step"
            + (f", scaled x{scale:g} to {config.dialogues_per_step} dialogues (linear; batched generation "
               "is sublinear, so it leans high)" if scale != 1 else " (the config's own batch)")
            + "; the machine's other load counts in it")
    import os

    import torch

    threads, load = torch.get_num_threads(), os.getloadavg()[0]
    note += f" (measured with {threads} torch thread(s) at a 1-minute load of {load:.1f} on {os.cpu_count()} cores)"
    return ProbeResult(round(seconds * scale, 1), round(seconds, 2), small.dialogues_per_step, scale, note,
                       max(0, peak - before), threads, round(load, 2))
