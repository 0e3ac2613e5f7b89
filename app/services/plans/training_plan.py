"""The Training view's presets and its plan before launch: plain functions, the view only wires them.

A preset fills the form: the fields the form has, and every other setting it makes in the YAML box, so the
job launched is the preset (trainer.presets). The plan is `python -m trainer plan --json` run in its own
process (the models it counts and the probe step it trains stay out of the app), cached per config and
hardware: a second Plan or Launch of the same settings does not count again.

The quick plan (`quick_plan`: memory counted, no probe) answers in seconds and is what Launch checks; its memory
figure is the one the job's admission and log use. The timed probe runs in the background
(app.services.plans.probe_task) and adds the time per step and the measured peak. The last plan of each preset
is kept in the lab home (plans/PRESET.json), so the view opens on it. Each timed plan says what its time was
measured on: the machine's load and the probe's threads.
"""
from __future__ import annotations

import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

from app.render import md

DAY_S = 24 * 3600
# (GPUs per node, nodes, GPU memory GiB) the plan assumes for a preset; None: this machine / not given
PRESET_HARDWARE = {"paper-ppo-7b": (8, 4, 80.0), "paper-ppo-think-7b": (8, 4, 80.0), "paper-grpo-7b": (8, 4, 80.0),
                   "paper-grpo-think-7b": (8, 4, 80.0),  # the paper's 32 GPUs: 4 nodes x 8 of 80 GiB
                   "one-gpu-lora-grpo-7b": (1, 1, 80.0), "one-gpu-grpo-1.5b": (1, 1, 24.0)}
NOT_PLANNING_KEYS = ("steps", "save_every", "keep_checkpoints", "seed", "output_dir", "report_to",
                     "store_dialogues")  # settings that change neither memory nor the time of a step
_PLANS: dict[str, dict[str, Any]] = {}
_OUTPUTS: dict[str, Path] = {}  # plan key -> the output file of its command while it runs (the probe's progress)
PROBE_LIMIT_S = 900.0  # the web's plans start no probe step after this (`plan --probe-limit`); then no time
PLAN_ON_OPEN_ENV = "RLVER_LAB_PLAN_ON_OPEN"  # "0": opening the Training view plans nothing (tests)


def preset_choices() -> list[str]:
    from trainer.presets import preset_names

    return preset_names()


def preset_description(name: str) -> str:
    from trainer.presets import PRESETS

    preset = PRESETS.get(name)
    return f"{md(preset.description)} (configs/{preset.config_file})" if preset else ""


def preset_form(name: str) -> tuple[list[Any], str, tuple[Optional[int], Optional[int], Optional[float]]]:
    """(the form's values in FORM_NAMES order, the YAML of the preset's other settings that differ from
    TrainConfig's defaults, the plan's hardware) for a preset."""
    import yaml

    from app.services.training import FORM_NAMES, form_values
    from trainer.config import TrainConfig
    from trainer.presets import preset_dict

    settings = TrainConfig.from_dict(preset_dict(name)).to_dict()
    defaults = TrainConfig().to_dict()
    other = {k: v for k, v in settings.items() if k not in FORM_NAMES and v != defaults[k]}
    extra = yaml.safe_dump(other, sort_keys=False, allow_unicode=True) if other else ""
    return form_values(settings), extra, PRESET_HARDWARE.get(name, (None, None, None))


def _whole(value: Any) -> Optional[int]:
    return int(value) if value not in (None, "") and float(value) > 0 else None


def plan_args(gpus: Any, nodes: Any, memory_gib: Any) -> list[str]:
    """The plan command's hardware arguments from the view's boxes (empty or 0: not given)."""
    args: list[str] = []
    if _whole(gpus):
        args += ["--gpus", str(_whole(gpus))]
    if _whole(nodes):
        args += ["--nodes", str(_whole(nodes))]
    if memory_gib not in (None, "") and float(memory_gib) > 0:
        args += ["--gpu-memory", f"{float(memory_gib):g}"]
    return args


def plan_key(config: dict[str, Any], args: list[str]) -> str:
    return json.dumps([{k: v for k, v in config.items() if k not in NOT_PLANNING_KEYS}, args], sort_keys=True)


def compute_plan(config: dict[str, Any], args: list[str], timeout_s: float = 1800,
                 probe_limit_s: float = PROBE_LIMIT_S, probe: bool = True,
                 stop: Optional[threading.Event] = None) -> dict[str, Any]:
    """The plan of a validated config (its dict) from `python -m trainer plan --json`, cached; on failure
    {'error': why}. The command forks from the lab's warm starter where it can (trainer.jobs.commands), so a
    plan does not spend ~10 s of CPU importing torch and transformers first. Its probe (probe=False: none, the
    quick plan) starts no step after probe_limit_s (the plan then says the time was not measured, and why);
    timeout_s bounds the whole command; `stop` set kills it."""
    import yaml

    from trainer.jobs.commands import run_command

    key = plan_key(config, args) + ("" if probe else " quick")
    if key in _PLANS:
        return _PLANS[key]
    if not probe and plan_key(config, args) in _PLANS:  # a timed plan counts the same memory
        return _PLANS[plan_key(config, args)]
    load_before, started = os.getloadavg()[0], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="plan-") as folder:
        path, output = Path(folder) / "config.yaml", Path(folder) / "plan.out"
        path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
        _OUTPUTS[key] = output
        try:
            done = run_command(["plan", "--config", str(path), "--json", "--probe-limit", f"{probe_limit_s:g}",
                                *(() if probe else ("--no-probe",)), *args], output, timeout_s, stop)
        finally:
            _OUTPUTS.pop(key, None)
        if not done:
            return {"error": "the plan was stopped" if stop is not None and stop.is_set() else
                    f"the plan took more than {timeout_s:.0f} s"}
        text = output.read_text(errors="replace")
    plan = _last_json_object(text)
    if plan is None:  # a failed plan prints "error: ..." last
        last = (text.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the plan could not be made: {last}"}
    plan["measured_on"] = {**(plan.get("measured_on") or {}), "load_before": round(load_before, 2),
                           "load_after": round(os.getloadavg()[0], 2), "cores": os.cpu_count(),
                           "plan_seconds": round(time.monotonic() - started, 1),
                           "at": time.strftime("%Y-%m-%d %H:%M", time.localtime())}
    _PLANS[key] = plan
    return plan


def _last_json_object(text: str) -> Optional[dict[str, Any]]:
    """The last line of `text` that is a JSON object: with --json the plan prints itself as one, last (what the
    probe's libraries print goes to stderr, which shares the output file)."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _kept_path(preset: str) -> Path:
    from storage.db import lab_home

    return lab_home() / "plans" / f"{preset}.json"


def kept_plan(preset: str) -> Optional[dict[str, Any]]:
    """The last plan made of a preset's settings in this lab home ({'key', 'steps', 'plan'}), or None."""
    try:
        kept = json.loads(_kept_path(preset).read_text())
    except (OSError, ValueError):
        return None
    return kept if isinstance(kept, dict) and isinstance(kept.get("plan"), dict) else None


def keep(preset: str, key: str, steps: int, plan: dict[str, Any]) -> None:
    """Keep the plan as the preset's last (never half-written; nothing for a failed plan or no preset)."""
    if not preset or plan.get("error"):
        return
    path = _kept_path(preset)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"key": key, "steps": steps, "plan": plan}))
    tmp.replace(path)  # never half-written


def quick_plan(config: dict[str, Any], args: list[str], preset: str = "") -> dict[str, Any]:
    """The plan without the probe (memory counted, no time), in seconds; kept as the preset's last plan when the
    preset has none yet (a timed plan is kept over it)."""
    plan = compute_plan(config, args, probe=False)
    if preset and kept_plan(preset) is None:
        keep(preset, plan_key(config, args), int(config.get("steps") or 0), plan)
    return plan


def probe_stage(key: str) -> str:
    """The last "probe: ..." line the plan of `key` printed ('' when none, or when it is not running)."""
    path = _OUTPUTS.get(key)
    try:
        text = path.read_text(errors="replace") if path is not None else ""
    except OSError:
        return ""
    stages = [line[len("probe: "):] for line in text.splitlines() if line.startswith("probe: ")]
    return stages[-1] if stages else ""


def opening_plan(preset: str) -> str:
    """What the plan box shows when the view opens: the preset's kept plan, or how to get one."""
    kept = kept_plan(preset)
    if kept is None:
        return (f"No plan of {md(preset)} yet. Press **Plan**: the memory this job needs at once, then on CPU the "
                "time per step, measured in the background by training one small step (minutes; on a busy 2-core "
                "machine 15-25). Launch never waits for it.")
    return (f"*The last plan of {md(preset)} (press **Plan** after changing the form):*\n\n"
            + plan_markdown(kept["plan"], int(kept.get("steps") or 0)))


def run_seconds(plan: dict[str, Any], steps: int) -> Optional[float]:
    """seconds_per_step x steps (None when the plan has no time: GPU plans, probe not run)."""
    per_step = plan.get("seconds_per_step")
    return None if per_step is None else float(per_step) * steps


def confirmation_reason(plan: dict[str, Any], steps: int) -> str:
    """Why Launch must be confirmed ('' when it need not): no plan, a job that will not fit, or one that
    will run for more than a day."""
    if plan.get("error"):
        return f"no plan ({plan['error']})"
    reasons = []
    if not plan.get("fits", False):
        reasons.append(f"it will not fit ({memory_text(plan)} needed of {plan.get('memory_gib', 0):.1f} GiB)")
    seconds = run_seconds(plan, steps)
    if seconds is not None and seconds > DAY_S:
        reasons.append(f"it will run for about {seconds / DAY_S:.1f} days ({steps} steps x "
                       f"{plan['seconds_per_step']:g} s)")
    return " and ".join(reasons)


def plan_markdown(plan: Optional[dict[str, Any]], steps: int) -> str:
    """The plan beside Launch: fits or not, the parts, the time and the notes (every free text escaped)."""
    if not plan:
        return "Press **Plan** to see the memory and time this job needs (Launch plans first too)."
    if plan.get("error"):
        return f"**No plan:** {md(plan['error'])}"
    where = "GPU" if plan.get("device") == "cuda" else "process (CPU)"
    head = (f"**{'Fits' if plan['fits'] else 'Does not fit'}**: {memory_text(plan)} per {where} of "
            f"{plan.get('memory_gib', 0):.1f} GiB" + (f" · {plan.get('gpus')} GPU(s)" if plan.get("device") == "cuda"
                                                      else ""))
    if plan.get("measured_gib") is not None:
        head += f" (the probe measured {plan['measured_gib']:.1f} GiB)"
    rows = ["| part | GiB |", "|---|---:|"] + [f"| {md(k)} | {v:.2f} |" for k, v in plan["parts"].items()]
    seconds = run_seconds(plan, steps)
    time_line = (f"time: not measured{' (a GPU plan)' if plan.get('device') == 'cuda' else ''}"
                 if seconds is None else
                 f"time: {plan['seconds_per_step']:g} s per step x {steps} steps = about "
                 f"{seconds / 3600:.1f} hours")
    notes = "\n".join(f"- {md(n)}" for n in plan.get("notes", []))
    return "\n\n".join([head, "\n".join(rows), time_line + measured_on_text(plan), notes])


def memory_text(plan: dict[str, Any]) -> str:
    """A job's one memory figure, rounded: the plan's count, as its admission and its log say it."""
    return f"{float(plan.get('per_gpu_gib') or 0):.1f} GiB"


def measured_on_text(plan: dict[str, Any]) -> str:
    """' (measured on 2 cores, 2 torch threads, load 1.0 -> 3.2, 2026-11-26 09:00)' for a timed plan."""
    on = plan.get("measured_on") or {}
    if plan.get("seconds_per_step") is None or not on:
        return ""
    threads = f", {on['threads']} torch thread(s)" if on.get("threads") else ""
    load = (f", load {on.get('load_before'):g} -> {on.get('load_after'):g} (1-minute average; a busier machine "
            "gives a longer time)" if on.get("load_before") is not None else "")
    return f" (measured on {on.get('cores')} cores{threads}{load}, {on.get('at', '')})"


def plan_on_open_allowed() -> bool:
    """Whether opening the Training view may make a quick plan (RLVER_LAB_PLAN_ON_OPEN=0: not, in tests)."""
    return os.environ.get(PLAN_ON_OPEN_ENV, "1") != "0"


def preset_quick_plan(preset: str) -> Optional[str]:
    """The Markdown of a preset's quick plan as it stands (memory counted, no probe; seconds), or None for an
    unknown preset."""
    from trainer.config import TrainConfig
    from trainer.presets import preset_dict

    if preset not in preset_choices():
        return None
    config = TrainConfig.from_dict(preset_dict(preset)).to_dict()
    gpus, nodes, gib = PRESET_HARDWARE.get(preset, (None, None, None))
    plan = quick_plan(config, plan_args(gpus, nodes, gib), preset)
    return (plan_markdown(plan, int(config.get("steps") or 0)) + "\n\n*Memory only: press **Plan** to time a step "
            "as well (in the background; Launch never waits for it).*")


def planned_step_seconds(config: dict[str, Any]) -> Optional[float]:
    """The time per step a timed plan of these settings measured (this app's plans, or a preset's kept plan),
    whatever hardware it was asked for; None when none was timed. A job shows its time left from it until a step
    of its own has ended."""
    want = {k: v for k, v in config.items() if k not in NOT_PLANNING_KEYS}
    plans = [(k.removesuffix(" quick"), p) for k, p in _PLANS.items()]
    folder = _kept_path("x").parent
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            kept = json.loads(path.read_text())
            plans.append((kept["key"], kept["plan"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    for key, plan in plans:
        try:
            same = json.loads(key)[0] == json.loads(json.dumps(want, sort_keys=True))
        except (ValueError, IndexError, TypeError):
            continue
        if same and isinstance(plan, dict) and plan.get("seconds_per_step"):
            return float(plan["seconds_per_step"])
    return None
