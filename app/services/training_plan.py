"""The Training view's presets and its plan before launch: plain functions, the view only wires them.

A preset fills the form: the fields the form has, and every other setting it makes in the YAML box, so the
job launched is the preset (trainer.presets). The plan is `python -m trainer plan --json` run in its own
process (the models it counts and the probe step it trains stay out of the app), cached per config and
hardware: a second Plan or Launch of the same settings does not measure again.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from app.render import md

DAY_S = 24 * 3600
# (GPUs per node, nodes, GPU memory GiB) the plan assumes for a preset; None: this machine / not given
PRESET_HARDWARE = {"paper-ppo-7b": (8, 4, 80.0), "paper-ppo-think-7b": (8, 4, 80.0), "paper-grpo-7b": (8, 4, 80.0),
                   "paper-grpo-think-7b": (8, 4, 80.0)}  # the paper's 32 GPUs: 4 nodes x 8 of 80 GiB
NOT_PLANNING_KEYS = ("steps", "save_every", "keep_checkpoints", "seed", "output_dir", "report_to",
                     "store_dialogues")  # settings that change neither memory nor the time of a step
_PLANS: dict[str, dict[str, Any]] = {}


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


def compute_plan(config: dict[str, Any], args: list[str], timeout_s: float = 1800) -> dict[str, Any]:
    """The plan of a validated config (its dict) from `python -m trainer plan --json`, cached; on failure
    {'error': why}."""
    import yaml

    key = plan_key(config, args)
    if key in _PLANS:
        return _PLANS[key]
    with tempfile.TemporaryDirectory(prefix="plan-") as folder:
        path = Path(folder) / "config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
        try:
            done = subprocess.run([sys.executable, "-m", "trainer", "plan", "--config", str(path), "--json", *args],
                                  capture_output=True, text=True, timeout=timeout_s,
                                  cwd=Path(__file__).resolve().parents[2])
        except subprocess.TimeoutExpired:
            return {"error": f"the plan took more than {timeout_s:.0f} s"}
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the plan could not be made: {last}"}
    plan = json.loads(lines[-1])
    _PLANS[key] = plan
    return plan


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
        reasons.append(f"it will not fit ({plan.get('per_gpu_gib')} GiB needed of {plan.get('memory_gib')} GiB)")
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
    head = (f"**{'Fits' if plan['fits'] else 'Does not fit'}**: {plan['per_gpu_gib']:g} GiB per {where} of "
            f"{plan.get('memory_gib', 0):g} GiB" + (f" · {plan.get('gpus')} GPU(s)" if plan.get("device") == "cuda"
                                                    else ""))
    rows = ["| part | GiB |", "|---|---:|"] + [f"| {md(k)} | {v:.2f} |" for k, v in plan["parts"].items()]
    seconds = run_seconds(plan, steps)
    time_line = (f"time: not measured{' (a GPU plan)' if plan.get('device') == 'cuda' else ''}"
                 if seconds is None else
                 f"time: {plan['seconds_per_step']:g} s per step x {steps} steps = about "
                 f"{seconds / 3600:.1f} hours")
    notes = "\n".join(f"- {md(n)}" for n in plan.get("notes", []))
    return "\n\n".join([head, "\n".join(rows), time_line, notes])
