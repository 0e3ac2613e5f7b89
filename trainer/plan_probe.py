"""Time per training step on CPU, measured with a real step of the config (the plan's seconds_per_step).

The probe keeps every setting of the config (model, turns, tokens, micro-batch, LoRA, epochs, simulator)
and trains fewer dialogues: the smallest batch that is a whole number of groups and micro-batches, with two
minibatches when the config takes several optimizer steps per batch (one minibatch would let the learner
skip its old-log-prob pass, a saving the full step does not get). It runs two steps: the first loads what
loads lazily (the simulator's judge models, kernels) and is not timed; the second is. When the config's batch
is bigger, one step of the config itself follows and gives the time: scaling the small step linearly leaned
high (batched generation is sublinear; cpu-demo was planned at 3.06 h for 46 steps measured in 61 minutes).
It also reports the memory the steps added to the process (its peak resident size during the steps less
its size once the models were loaded): activations, optimizer states, rollout caches. The micro-batch is
the config's, so this is what a full step adds too. The peak is reset before the steps where Linux allows
(/proc/self/clear_refs), so an earlier, bigger piece of work in the same process does not count.

The trainer's folder is made under the lab home (plan-probes/), so a probe started from the web passes the
web's path check like any job. Each stage prints one "probe: ..." line to stderr with the time so far, and
past `time_limit_s` the probe starts no further step: it raises ProbeTimeLimit, which the plan reports as
"not measured" with the reason (a step under way runs to its end; the web's plan also has an outer limit).
"""
from __future__ import annotations

import math
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any, Optional

from trainer.config import TrainConfig


PROBE_LIMIT_S = 1200.0  # the probe's default time limit (`python -m trainer plan --probe-limit`)


class ProbeTimeLimit(RuntimeError):
    """The probe passed its time limit before a step; the message says when and what it had done."""


class _Clock:
    """Prints the probe's stages with the time so far, and stops it at the limit before a new step."""

    def __init__(self, limit_s: Optional[float]):
        self.limit_s, self.started = limit_s, time.monotonic()

    def say(self, text: str) -> None:
        print(f"probe: {text} ({time.monotonic() - self.started:.0f} s so far)", file=sys.stderr, flush=True)

    def before(self, what: str) -> None:
        elapsed = time.monotonic() - self.started
        if self.limit_s is not None and elapsed > self.limit_s:
            self.say(f"stopped at its time limit of {self.limit_s:g} s, before {what}")
            raise ProbeTimeLimit(f"the probe passed its time limit of {self.limit_s:g} s after {elapsed:.0f} s, "
                                 f"before {what}")
        self.say(what)


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


def rss_bytes() -> int:
    """This process's resident size now (Linux /proc)."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def reset_peak_rss() -> bool:
    """Start this process's peak resident size afresh (Linux: writing 5 to /proc/self/clear_refs), so the peak
    read after the steps is theirs and not an earlier, bigger piece of work's; False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes(reset: bool) -> int:
    """The peak resident size since `reset_peak_rss` (VmHWM) when it was reset, else the process's
    lifetime peak (ru_maxrss), which overstates the steps in a process that ran something bigger before."""
    if reset:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def probe_config(config: TrainConfig) -> TrainConfig:
    """The config with a smaller batch (see the module docstring); the config itself when it is small."""
    base = math.lcm(config.effective_group_size, config.micro_batch_size)
    several = config.ppo_epochs > 1 or config.dialogues_per_step // config.minibatch_size > 1
    dialogues, minibatch = (2 * base, base) if several else (base, base)
    if dialogues >= config.dialogues_per_step:
        dialogues, minibatch = config.dialogues_per_step, config.minibatch_size
    return replace(config, dialogues_per_step=dialogues, minibatch_size=minibatch, steps=2, save_every=0,
                   store_dialogues=False, report_to=["none"], output_dir="")


def _timed_step(config: TrainConfig, warm_up: bool, clock: _Clock) -> tuple[float, int, int]:
    """(seconds of the timed step, resident size before the steps, peak resident size) of a trainer of
    `config` in this process: with warm_up, step 1 is not timed and step 2 is."""
    from storage.db import lab_home
    from trainer.learning.rl_trainer import RLTrainer

    folder = lab_home() / "plan-probes"
    folder.mkdir(parents=True, exist_ok=True)
    n = config.dialogues_per_step
    with tempfile.TemporaryDirectory(prefix="probe-", dir=folder) as out:
        clock.say(f"loading the models for steps of {n} dialogue(s)")
        trainer = RLTrainer(replace(config, output_dir=out))
        try:
            before = rss_bytes()
            reset = reset_peak_rss()
            if warm_up:
                clock.before(f"a warm-up step of {n} dialogue(s) (not timed)")
                trainer.train_step(1)  # lazy loading, first-call costs
            clock.before(f"the timed step of {n} dialogue(s)")
            t0 = time.monotonic()
            trainer.train_step(2 if warm_up else 1)
            seconds = time.monotonic() - t0
            clock.say(f"the step of {n} dialogue(s) took {seconds:.1f} s")
            peak = peak_rss_bytes(reset)
        finally:
            close = getattr(trainer.policy_engine, "close", None)
            if close:
                close()
            del trainer
    return seconds, before, peak


def measure_seconds_per_step(config: TrainConfig, time_limit_s: Optional[float] = PROBE_LIMIT_S) -> ProbeResult:
    """Train two small steps of the config in this process (the second timed, and its memory measured),
    then, when the config's batch is bigger, one step of the config's own batch, which gives the time
    (RuntimeError/OSError/ValueError from the trainer propagate: the caller reports them; ProbeTimeLimit when
    the time limit passed before a step)."""
    import os

    import torch

    clock = _Clock(time_limit_s)
    small = probe_config(config)
    small_seconds, before, peak = _timed_step(small, warm_up=True, clock=clock)
    seconds, timed = small_seconds, small.dialogues_per_step
    if small.dialogues_per_step < config.dialogues_per_step:
        # the time is one real step of the full batch (see the module docstring), after the warm-up
        seconds, _, _ = _timed_step(replace(config, steps=1, save_every=0, store_dialogues=False,
                                            report_to=["none"], output_dir=""), warm_up=False, clock=clock)
        timed = config.dialogues_per_step
    threads, load = torch.get_num_threads(), os.getloadavg()[0]
    note = (f"seconds_per_step: one real step of {timed} dialogue(s) (minibatch {config.minibatch_size}, "
            f"micro-batch {config.micro_batch_size}, {config.max_turns} turn(s), {config.max_new_tokens} new "
            f"tokens) took {seconds:.1f} s"
            + (f", after two warm-up steps of {small.dialogues_per_step} ({small_seconds:.1f} s the second)"
               if timed != small.dialogues_per_step else " after a warm-up step (the config's own batch)")
            + f"; measured with {threads} torch thread(s) at a 1-minute load of {load:.1f} on {os.cpu_count()} "
            "cores: the machine's other load counts in it")
    return ProbeResult(round(seconds, 1), round(seconds, 2), timed, 1.0, note, max(0, peak - before), threads,
                       round(load, 2))


def measured_step_memory(plan: Any, step_memory_bytes: int) -> None:
    """On CPU, put what the probe's steps measurably added (activations, rollout caches, the simulator's lazily
    loaded models; less the gradients and optimizer states the first step allocated, counted in their own parts)
    beside the counted plan: extra['measured_gib'] is the persistent parts plus that. The plan's figure stays
    the count, the one the job's admission and log use (trainer.jobs.admission, without a probe), so a job has
    one memory figure everywhere; a measured peak above it is a "does not fit" when over the memory."""
    from trainer.plan_memory import GIB

    states = sum(v for k, v in plan.parts.items() if k.endswith("_grads_optimizer")) * GIB
    measured = max(0.0, step_memory_bytes - states)
    persistent = sum(v for k, v in plan.parts.items() if k != "transient_peak")
    plan.extra["measured_gib"] = round(persistent + measured / GIB, 2)
    plan.extra["step_measured_gib"] = round(measured / GIB, 2)
    if plan.extra["measured_gib"] > plan.extra["memory_gib"]:
        plan.fits = False
        plan.notes.append(f"does not fit: the probe measured {plan.extra['measured_gib']:g} GiB per process of "
                          f"{plan.extra['memory_gib']:g} GiB")
    plan.notes.append(f"measured by the probe: {plan.extra['measured_gib']:g} GiB per process (the persistent parts "
                      f"and {round(measured / GIB, 2):g} GiB its steps added: activations, rollout caches, the "
                      f"simulator's models) against the counted {plan.per_gpu_gib:g} GiB (transient_peak "
                      f"{plan.parts.get('transient_peak', 0):g} GiB)")
