"""The Training view's timed probe: `python -m trainer plan` with its one-step probe, run in the background of the
app while the quick plan (no probe) is already shown.

A probe lives in the app's process, not in a page: a reloaded page finds it again (`running_key`), follows its
stages with a live clock, and can stop it (`cancel`), which kills its process group. Launch never waits for one:
it stops the probe (a training job takes every core) and starts the job. The last finished plan of each preset is
kept in the lab home (app.services.plans.training_plan.keep), so the view opens on it.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from app.render import md

# how long a probe has taken on a busy 2-core machine when nothing else says (cpu-demo: 23 minutes at load 5-22)
UNKNOWN_PROBE_WORDS = "on a busy 2-core machine a probe of cpu-demo has taken 15-25 minutes"


@dataclass
class ProbeTask:
    """A probe being run in a background thread (`plan` is set when it ended, `stopped` when it was stopped)."""
    key: str
    preset: str
    steps: int
    quick: dict[str, Any]  # the plan without the probe, shown meanwhile
    started: float = field(default_factory=time.monotonic)
    expected_s: Optional[float] = None  # how long the last plan of the preset took
    plan: Optional[dict[str, Any]] = None
    stop: threading.Event = field(default_factory=threading.Event)
    stopped: str = ""  # who stopped it ("Launch", "Stop"), when it was stopped
    stage: str = ""  # the last "probe: ..." line seen, without its clock
    stage_since: float = field(default_factory=time.monotonic)


_TASKS: dict[str, ProbeTask] = {}
_LOCK = threading.Lock()


def start(config: dict[str, Any], args: list[str], preset: str, quick: dict[str, Any]) -> str:
    """Start the probe of a validated config (joined when one of the same settings runs); the key to follow."""
    from app.services.plans import training_plan

    key = training_plan.plan_key(config, args)
    with _LOCK:
        task = _TASKS.get(key)
        if task is not None and task.plan is None:
            return key
        kept = training_plan.kept_plan(preset) if preset else None
        timed = (kept or {}).get("plan") or {}
        expected = timed.get("measured_on", {}).get("plan_seconds") if timed.get("seconds_per_step") else None
        task = _TASKS[key] = ProbeTask(key, preset, int(config.get("steps") or 0), quick, expected_s=expected)

    def run() -> None:
        try:
            plan = training_plan.compute_plan(config, args, stop=task.stop)
        except Exception as exc:  # noqa: BLE001  the view must hear of it, not wait for ever
            plan = {"error": f"the plan could not be made: {type(exc).__name__}: {exc}"}
        if not task.stop.is_set():
            training_plan.keep(preset, key, task.steps, plan)
        task.plan = plan

    threading.Thread(target=run, name=f"probe-{preset or 'config'}", daemon=True).start()
    return key


def running(key: Optional[str]) -> bool:
    task = _TASKS.get(key or "")
    return task is not None and task.plan is None


def running_key(preset: str = "") -> Optional[str]:
    """The newest probe still running (of `preset` when given): what a reloaded page follows."""
    live = [t for t in _TASKS.values() if t.plan is None and (not preset or t.preset == preset)]
    return max(live, key=lambda t: t.started).key if live else None


def cancel(key: Optional[str], by: str) -> bool:
    """Stop the probe of `key` (its process group is killed within a moment); False when none runs."""
    task = _TASKS.get(key or "")
    if task is None or task.plan is not None or task.stop.is_set():
        return False
    task.stopped = by
    task.stop.set()
    return True


def steps_of(key: Optional[str]) -> int:
    task = _TASKS.get(key or "")
    return task.steps if task else 0


def progress(key: Optional[str]) -> Optional[str]:
    """The plan box's Markdown for a probe: the quick plan and a live line while it runs; the timed plan when it
    ended; the quick plan and why there is no time when it was stopped. None for an unknown key."""
    from app.services.plans.training_plan import plan_markdown
    from trainer.benchmarking.progress import duration_text

    task = _TASKS.get(key or "")
    if task is None:
        return None
    if task.stopped:
        return (plan_markdown(task.quick, task.steps) + f"\n\n*The timed probe was stopped ({md(task.stopped)}): "
                "the time per step is not measured. Press **Plan** to time it again.*")
    if task.plan is not None:
        return plan_markdown(task.plan, task.steps)
    now = time.monotonic()
    stage = _stage(task, now)
    line = (f"**Timing one step…** {duration_text(now - task.started)} so far: training a small real step of these "
            "settings on CPU to time it")
    if stage:
        line += f" (now: {stage})"
    left = (task.expected_s or 0) - (now - task.started)
    if task.expected_s and left > 0:
        line += (f"; the last plan of {md(task.preset)} took {duration_text(task.expected_s)}, so about "
                 f"{duration_text(left)} left")
    elif task.expected_s:
        line += f"; longer than the last plan of {md(task.preset)} ({duration_text(task.expected_s)}): a busier machine"
    else:
        line += f"; {UNKNOWN_PROBE_WORDS}"
    return (plan_markdown(task.quick, task.steps) + f"\n\n{line}. **Launch does not wait for it**: it stops the "
            "probe (the job takes every core) and starts the job.")


def _stage(task: ProbeTask, now: float) -> str:
    """The probe's current stage with a clock that moves: the time since that stage's line first appeared."""
    from app.services.plans.training_plan import probe_stage
    from trainer.benchmarking.progress import duration_text

    text = probe_stage(task.key)
    if text:
        bare = text.rsplit(" (", 1)[0] if text.endswith(" so far)") else text
        if bare != task.stage:
            task.stage, task.stage_since = bare, now
    return f"{md(task.stage)}, {duration_text(now - task.stage_since)} in" if task.stage else ""
