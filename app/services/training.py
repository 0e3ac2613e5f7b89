"""Presentation helpers for the Training view: the jobs table, a job's summary, curves and checkpoints.

Inputs are the plain dicts of trainer.jobs.queue (list_jobs, job_detail). `launch_training_job` is the one thing
here that starts a job: it records it and launches its process (which runs it through trainer.job_runner).
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Optional

import plotly.graph_objects as go

from app.plots import TIER_COLOURS, tier_bands
from app.render import md
from app.services.runs import Series, curves_figure
from simulator.llm.traffic import read_snapshot, traffic_text
from storage import Store

if TYPE_CHECKING:
    from trainer.config import TrainConfig

JOB_HEADERS = ["id", "name", "kind", "status", "progress", "algorithm", "created", "note"]
LIVE_STATUSES = ("queued", "running", "stalled")  # stalled: a live owner with a late heartbeat (Cancel reaches it)
RESUMABLE = ("interrupted", "failed", "cancelled", "dead")  # dead: derived when read (trainer.jobs.liveness)


def _when(value: Optional[datetime]) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if isinstance(value, datetime) else ""


def progress_text(job: dict[str, Any]) -> str:
    """'step 3/10 done (30%)': the steps finished (a step's dialogues show beside it, app.services.job_progress);
    just the percentage when the total is unknown. A running job that calls an API adds its traffic:
    'step 3/10 done (30%) · API 4 in flight · 12 waiting · 3 retried'."""
    pct = f"{100 * float(job.get('progress') or 0):.0f}%"
    total = int(job.get("total_steps") or 0)
    text = f"step {int(job.get('step') or 0)}/{total} done ({pct})" if total else pct
    traffic = traffic_text(read_snapshot(job.get("output_dir"))) if job.get("status") == "running" else ""
    return f"{text} · API {traffic}" if traffic else text


def jobs_rows(jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """Rows of the jobs table (JOB_HEADERS), in the order given (list_jobs: newest first)."""
    rows = []
    for j in jobs:
        config = j.get("config") or {}
        note = (j.get("error") or "").splitlines()[0][:120] if j.get("error") else ""
        if j.get("status") == "queued" and j.get("pid"):
            note = note or "waiting for the running job to end"
        rows.append([j["id"], j.get("name", ""), j.get("kind", ""), j.get("status", ""), progress_text(j),
                     config.get("algorithm", ""), _when(j.get("created_at")), note])
    return rows


def cancel_message(job_id: int, status: str) -> str:
    """What Cancel did, in words that stay true while the job winds down (the table shows the status after)."""
    if status in LIVE_STATUSES:
        return (f"Cancel sent to job #{job_id}: it stops at the end of what it is doing now (a dialogue turn or "
                "an update) and then shows as cancelled.")
    return f"Job #{job_id} is {status}."


def heartbeat_text(detail: dict[str, Any], now: Optional[datetime] = None) -> str:
    """'12 s ago' for a live job's last heartbeat; 'late: 95 s ago' past the stall limit; '' for others."""
    from storage.models import utcnow
    from trainer.jobs.liveness import STALE_AFTER_S

    beat = detail.get("heartbeat_at")
    if not isinstance(beat, datetime) or detail.get("status") not in LIVE_STATUSES:
        return ""
    age = max(0.0, ((now or utcnow()) - beat).total_seconds())
    return f"{'late: ' if age > STALE_AFTER_S else ''}{age:.0f} s ago"


def job_summary_md(detail: Optional[dict[str, Any]]) -> str:
    """A job's status block (Markdown, every free text escaped)."""
    if not detail:
        return "Select a job in the table."
    cfg = detail.get("config") or {}
    lines = [f"**Job #{detail['id']}** · {md(detail.get('name', ''))} · **{md(detail.get('status', ''))}** · "
             f"{md(progress_text(detail))}"]
    facts = [("model", cfg.get("model")), ("algorithm", cfg.get("algorithm")), ("mode", cfg.get("mode")),
             ("simulator", cfg.get("simulator")), ("calibration", cfg.get("calibration")),
             ("seed", detail.get("seed")), ("pid", detail.get("pid")),
             ("node", " · Ray node ".join(filter(None, (detail.get("host"), detail.get("ray_node"))))),
             ("Ray job", detail.get("backend_job_id") if detail.get("backend") == "ray" else None),
             ("heartbeat", heartbeat_text(detail) or _when(detail.get("heartbeat_at"))),
             ("code", detail.get("code_version"))]
    lines.append(" · ".join(f"{k}: **{md(v)}**" for k, v in facts if v not in (None, "")))
    if ranks := cfg.get("ray_ranks"):  # a training job across Ray nodes: where each rank runs
        lines.append("| rank | node rank | Ray node | address |\n|---:|---:|---|---|\n" + "\n".join(
            f"| {md(r.get('rank'))} | {md(r.get('node_rank'))} | {md(str(r.get('node_id', ''))[:16])} | "
            f"{md(r.get('node_ip'))} |" for r in ranks))
    if detail.get("error"):
        lines.append(f"**Reason:** {md(detail['error'])}")
    return "\n\n".join(lines)


def _series(metrics: dict[str, dict[str, list]], name: str) -> Series:
    m = metrics.get(name) or {}
    return list(zip([int(s) for s in m.get("step", [])], [float(v) for v in m.get("value", [])]))


def reward_names(metrics: dict[str, Any]) -> list[str]:
    return sorted(n for n in metrics if "reward" in n.lower())


def emotion_names(metrics: dict[str, Any]) -> list[str]:
    """Metrics on the emotion scale (0..100): names with 'emotion', rates and counts left out."""
    return sorted(n for n in metrics if "emotion" in n.lower()
                  and not any(w in n.lower() for w in ("rate", "count", "frac", "delta", "std", "tier")))


def reward_figure(detail: Optional[dict[str, Any]]) -> go.Figure:
    """The reward metrics of a job against the step."""
    metrics = (detail or {}).get("metrics") or {}
    return curves_figure({n: _series(metrics, n) for n in reward_names(metrics)}, title="reward", y_title="reward")


OVERLAP_METRICS = ("policy_lag_mean", "policy_lag_max", "learner_idle_share")  # trainer/learning/overlap.py, rl_trainer


def overlap_figure(detail: Optional[dict[str, Any]]) -> go.Figure:
    """Overlapped training per step: the policy version lag of the trained replies (mean, and the oldest
    reply's) and the learner's idle share (time not updating / step time; 1 - it is the busy share)."""
    metrics = (detail or {}).get("metrics") or {}
    return curves_figure({n: _series(metrics, n) for n in OVERLAP_METRICS if n in metrics},
                         title="policy lag · learner idle share", y_title="versions behind · share")


def emotion_step_figure(detail: Optional[dict[str, Any]]) -> go.Figure:
    """The final-emotion metrics of a job against the step, over the benchmark's tier bands."""
    metrics = (detail or {}).get("metrics") or {}
    fig = curves_figure({n: _series(metrics, n) for n in emotion_names(metrics)}, title="final emotion",
                        y_title="emotion")
    for name, low, high in tier_bands():
        fig.add_hrect(y0=low, y1=high, fillcolor=TIER_COLOURS[name], opacity=0.12, line_width=0, layer="below",
                      annotation_text=name, annotation_position="right", annotation_font_size=11)
    fig.update_yaxes(range=[0, 105])
    return fig


CHECKPOINT_HEADERS = ["step", "path", "metrics", "saved"]


def checkpoint_rows(detail: Optional[dict[str, Any]]) -> list[list[Any]]:
    """Rows of the checkpoints table, newest first (the one to benchmark is usually the latest)."""
    rows = []
    for c in reversed((detail or {}).get("checkpoints") or []):
        metrics = ", ".join(f"{k}={v:.3g}" if isinstance(v, (int, float)) else f"{k}={v}"
                            for k, v in sorted((c.get("metrics") or {}).items()))
        rows.append([c["step"], c["path"], metrics, _when(c.get("created_at"))])
    return rows


def actions_for(status: str) -> dict[str, bool]:
    """Which job buttons make sense: cancel a live job, resume a stopped one, clone any."""
    return {"cancel": status in LIVE_STATUSES, "resume": status in RESUMABLE, "clone": bool(status)}


# ------------------------------------------------------------------------------------------------ the form
# (TrainConfig field, label, widget, choices). Every other setting can be given in the form's YAML box.
FORM_FIELDS: list[tuple[str, str, str, tuple]] = [
    ("model", "model ('default' = SmolLM2-135M-Instruct, or a local folder)", "text", ()),
    ("persona_set", "persona set (builtin, builtin:train, builtin:heldout, set:NAME, file:PATH or persona ids, "
                    "comma-separated)",
     "choice+", ()),
    ("simulator", "simulator (offline or openai:MODEL)", "text", ()),
    ("simulator_preset", "simulator preset", "choice", ()),
    ("prompt_pack", "simulator prompt pack (own, own:json, sage:DIR, rlver:DIR)", "text", ()),
    ("algorithm", "algorithm", "choice", ()),
    ("advantage", "advantage (dialogue: the paper's; per turn: turn_grpo with grpo, turn_gae with ppo)", "choice", ()),
    ("mode", "mode", "radio", ()),
    ("rollout_backend", "rollout backend (what samples the replies)", "choice", ()),
    ("steps", "steps", "int", ()),
    ("actor_lr", "learning rate (policy)", "float", ()),
    ("critic_lr", "critic learning rate (PPO)", "float", ()),
    ("group_size", "group size (GRPO / RLOO)", "int", ()),
    ("dialogues_per_step", "dialogues per step", "int", ()),
    ("minibatch_size", "minibatch size (dialogues per update)", "int", ()),
    ("micro_batch_size", "micro batch size", "int", ()),
    ("max_tokens_per_micro_batch", "max tokens per micro-batch (0: micro batch size rows)", "int", ()),
    ("max_turns", "max policy turns", "int", ()),
    ("max_new_tokens", "max new tokens per turn", "int", ()),
    ("save_every", "save a checkpoint every K steps", "int", ()),
    ("lora", "LoRA (a deviation from the paper, for small machines)", "bool", ()),
    ("lora_r", "LoRA rank", "int", ()),
    ("seed", "seed", "int", ()),
]
FORM_NAMES = [f[0] for f in FORM_FIELDS]
REQUIRED_WORDS = {"int": "a whole number", "float": "a number", "choice": "one of the choices",
                  "radio": "one of the choices", "choice+": "a choice or your own value"}
GENERAL = "_general"  # errors that belong to no form field (the YAML box, fields only set there)


def field_choices(name: str) -> tuple[str, ...]:
    """Allowed values of a choice field, from trainer.config_rules (persona sets: simulator.personas.specs)."""
    from simulator.personas.specs import PERSONA_SETS
    from trainer import config_rules

    return {"persona_set": PERSONA_SETS, "simulator_preset": config_rules.SIMULATOR_RULE_SETS,
            "algorithm": config_rules.ALGORITHMS,
            "advantage": tuple(config_rules.ADVANTAGES), "mode": config_rules.MODES,
            "rollout_backend": config_rules.ROLLOUT_BACKENDS}.get(name, ())


def persona_set_choices(store: Store) -> list[str]:
    """The persona set field's choices: the built-in sets and set:NAME for every stored set."""
    from simulator.personas.specs import spec_choices

    return spec_choices(store)


def form_values(config: Optional[dict[str, Any]] = None) -> list[Any]:
    """The form's values (FORM_NAMES order) for a config dict; TrainConfig defaults where it has none."""
    from simulator.user.rules import RULE_SET_ALIASES
    from trainer.config import TrainConfig

    merged = {**TrainConfig().to_dict(), **(config or {})}
    preset = merged.get("simulator_preset")  # a job stored before a preset was renamed shows its new name
    merged["simulator_preset"] = RULE_SET_ALIASES.get(preset, preset) if isinstance(preset, str) else preset
    out = []
    for name in FORM_NAMES:
        value = merged.get(name)
        out.append(", ".join(value) if name == "persona_set" and isinstance(value, list) else value)
    return out


def config_from_form(values: dict[str, Any], extra_yaml: str = "", check_paths: bool = True,
                     store: Optional[Store] = None):
    """(TrainConfig or None, {field: problem}) from the form's values and the optional YAML of other settings.

    Empty number boxes are 'required'; the YAML box must be a mapping of TrainConfig settings; every
    problem is keyed by the field it concerns (GENERAL for the YAML box itself). With a store, the persona
    set must name personas there (a stored set that exists, ids it holds), so a job is not launched only to
    fail on its first line."""
    import yaml

    from trainer.config import ConfigError, TrainConfig

    errors: dict[str, str] = {}
    data: dict[str, Any] = {}
    kinds = {f[0]: f[2] for f in FORM_FIELDS}
    for name, value in values.items():
        kind = kinds.get(name, "text")
        if value is None or (isinstance(value, str) and not value.strip() and kind != "text"):
            errors[name] = f"required: {REQUIRED_WORDS.get(kind, 'a value')}"
            continue
        if kind == "int":
            if float(value) != int(value):
                errors[name] = f"must be a whole number, got {value}"
                continue
            value = int(value)
        elif kind == "float":
            value = float(value)
        elif isinstance(value, str):
            value = value.strip()
            if name == "persona_set" and "," in value:  # a list of persona ids
                value = [v.strip() for v in value.split(",") if v.strip()]
        data[name] = value
    if extra_yaml and extra_yaml.strip():
        try:
            extra = yaml.safe_load(extra_yaml)
        except yaml.YAMLError as exc:
            extra = None
            errors[GENERAL] = f"other settings: not valid YAML ({str(exc).splitlines()[0]})"
        except RecursionError:
            extra = None
            errors[GENERAL] = "other settings: not valid YAML (nested too deeply)"
        if extra is not None and not isinstance(extra, dict):
            errors[GENERAL] = "other settings: must be a mapping like 'entropy_coef: 0.001'"
        elif isinstance(extra, dict):
            data.update(extra)
    try:
        config = TrainConfig.from_dict(data)
    except ConfigError as exc:
        return None, {**exc.errors, **errors}
    errors.update(config.errors(check_paths=check_paths))
    if store is not None and "persona_set" not in errors:
        from simulator.personas.specs import PersonaSpecError, resolve_personas

        try:
            resolve_personas(config.persona_set, store)
        except PersonaSpecError as exc:
            errors["persona_set"] = str(exc)
    return (None, errors) if errors else (config, {})


def error_updates(errors: dict[str, str]) -> tuple[list[str], str]:
    """(one message per form field in FORM_NAMES order, '' when fine; the message for everything else)."""
    per_field = [f"⚠ {md(errors[n])}" if n in errors else "" for n in FORM_NAMES]
    other = [f"**{md(k)}**: {md(v)}" if k != GENERAL else md(v) for k, v in errors.items() if k not in FORM_NAMES]
    return per_field, "\n\n".join(other)


def launch_training_job(store: Store, store_url: str, config: TrainConfig, name: str = "") -> tuple[Optional[int], str]:
    """Record a training job for a validated TrainConfig and launch its process; (job id, the message the
    Training view shows: launched, waiting behind earlier live jobs, or recorded but not started)."""
    from trainer.jobs import queue as job_queue

    name = name.strip() or f"{config.algorithm}-{config.mode}"
    try:
        job_id = job_queue.create_job(store, "train", config.to_dict(), name=name, seed=config.seed)
    except job_queue.JobError as exc:  # the owner's ceiling of live jobs
        return None, f"Not launched: {md(exc)}"
    try:
        job_queue.launch(store_url, job_id)
    except (job_queue.JobError, OSError) as exc:
        return job_id, f"Job #{job_id} was recorded but could not start: {md(exc)}"
    ahead = [j["id"] for j in job_queue.list_jobs(store) if j["status"] in LIVE_STATUSES and j["id"] < job_id
             and j["kind"] in job_queue.QUEUED_KINDS]
    queue = (f"; job(s) #{', #'.join(map(str, ahead))} are live: it runs beside them if it fits (memory and cores), "
             "else waits its turn (its line in the jobs table says which)") if ahead else ""
    return job_id, f"Launched job #{job_id}{queue}."


def benchmark_config_for(detail: Optional[dict[str, Any]], checkpoint_path: str) -> dict[str, Any]:
    """The benchmark job config for a checkpoint: the checkpoint as the policy, scored against the
    simulator its training job used (the benchmark protocol itself is the runner's default)."""
    cfg = (detail or {}).get("config") or {}
    config: dict[str, Any] = {"policy": checkpoint_path, "simulator": cfg.get("simulator") or "offline",
                              "profiles": "builtin", "mode": cfg.get("mode") or "direct"}
    if cfg.get("simulator_base_url"):
        config["simulator_base_url"] = cfg["simulator_base_url"]
    if detail:
        config["name"] = f"job #{detail['id']} checkpoint"
    return config
