"""The Benchmark view's form as plain functions: its defaults, reading it into a BenchmarkConfig dict with
one message per field, and the job details a click on a benchmark job row opens.

Optional numbers (simulator temperature and max tokens) are text boxes: empty means "the backend's
default", which a number box cannot say (it shows and sends 0). "Quick look" plays one persona with replies
capped at QUICK_REPLY_CAP tokens: minutes on the default policy, its expected time shown before Start.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from app.render import fenced, md, readable_log
from simulator.access import config_errors

# (field, label, default) in the form's order; the field is the BenchmarkConfig setting it fills
FIELDS: list[tuple[str, str, Any]] = [
    ("policy", "policy ('default', a model or checkpoint folder, vllm:PATH, openai:MODEL, replay:FILE)", "default"),
    ("simulator", "simulator (offline, openai:MODEL or replay:FILE)", "offline"),
    ("simulator_base_url", "simulator endpoint (openai: simulators)", ""),
    ("prompt_pack", "prompt pack (own, own:json or sage:DIR)", "own"),
    ("simulator_temperature", "simulator temperature (empty: backend default)", ""),
    ("simulator_max_tokens", "simulator max tokens (empty: backend default)", ""),
    ("profiles", "profiles (a set, set:NAME, a JSONL file path or persona ids)", "builtin:heldout"),
    ("limit", "limit (first N profiles; 0 or empty = all)", 0),
    ("max_new_tokens", "per-reply token cap (0 = the protocol's: 4,096 for local policies)", 0),
    ("temperature", "policy temperature", 0.7),
    ("mode", "mode", "direct"),
    ("seed", "seed (empty = 0)", 0),
    ("name", "name (optional)", ""),
    ("gpus", "GPUs its job asks a Ray node for (1: a local policy on a GPU; 0 on one machine)", 0),
    ("quick", "quick look: one persona, replies capped at 16 tokens", False),
]
NAMES = [f[0] for f in FIELDS]
DEFAULTS = {name: default for name, _, default in FIELDS}
GENERAL = "_general"
REQUIRED = {"policy": "required: 'default', a model or checkpoint folder, vllm:PATH, openai:MODEL or replay:FILE",
            "simulator": "required: 'offline', openai:MODEL or replay:FILE",
            "profiles": "required: 'builtin', 'builtin:heldout', set:NAME, a profiles file or persona ids",
            "mode": "required: direct or think"}
SPEC_PREFIXES = ("default", "openai:", "replay:", "vllm:", "transformers:")
QUICK_REPLY_CAP = 16  # tokens a reply in a quick look: the default policy's dialogue then takes well under a minute
QUICK = {"limit": 1, "max_new_tokens": QUICK_REPLY_CAP}  # what the quick look sets in the form


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _number(name: str, value: Any, whole: bool, empty: Any, errors: dict[str, str]) -> Any:
    """The number in a box ('' or None: `empty`); a problem goes to errors[name]."""
    text = _text(value)
    if not text:
        return empty
    try:
        number = float(text)
    except ValueError:
        errors[name] = f"must be a {'whole ' if whole else ''}number, got {text!r}"
        return empty
    if whole:
        if number != int(number):
            errors[name] = f"must be a whole number, got {text}"
            return empty
        return int(number)
    return number


def form_config(values: dict[str, Any]) -> tuple[Optional[dict[str, Any]], dict[str, str]]:
    """(BenchmarkConfig dict, {}) or (None, {field: problem}) from the form's values (NAMES keys; missing ones
    take DEFAULTS). Every problem is keyed by its form field (GENERAL for settings the form does not show)."""
    from trainer.benchmarking.benchmark import BenchmarkConfig

    v = {**DEFAULTS, **values}
    errors: dict[str, str] = {}
    config: dict[str, Any] = {name: _text(v[name]) for name in
                              ("policy", "simulator", "simulator_base_url", "prompt_pack", "profiles", "mode", "name")}
    for name, problem in REQUIRED.items():
        if not config[name]:
            errors[name] = problem
    config["prompt_pack"] = config["prompt_pack"] or "own"  # empty: the lab's own prompts, as the label says
    config["simulator_temperature"] = _number("simulator_temperature", v["simulator_temperature"], False, None, errors)
    config["simulator_max_tokens"] = _number("simulator_max_tokens", v["simulator_max_tokens"], True, None, errors)
    config["limit"] = _number("limit", v["limit"], True, 0, errors)
    config["max_new_tokens"] = _number("max_new_tokens", v["max_new_tokens"], True, 0, errors)
    config["temperature"] = _number("temperature", v["temperature"], False, DEFAULTS["temperature"], errors)
    config["seed"] = _number("seed", v["seed"], True, 0, errors)
    config["gpus"] = _number("gpus", v["gpus"], True, 0, errors)
    if v["quick"]:  # one persona, short replies (a smaller cap typed in the form is kept)
        config["limit"] = QUICK["limit"]
        if not config["max_new_tokens"] or config["max_new_tokens"] > QUICK_REPLY_CAP:
            config["max_new_tokens"] = QUICK_REPLY_CAP
        config["name"] = config["name"] or "quick look"
    refused = config_errors(BenchmarkConfig(**{k: val for k, val in config.items() if k not in errors}))
    errors.update({name: problem for name, problem in refused.items() if name in NAMES})  # before any look
    if config["policy"] and "policy" not in errors and not config["policy"].startswith(SPEC_PREFIXES) and \
            not Path(config["policy"]).expanduser().is_dir():
        errors["policy"] = (f"model folder {config['policy']} not found: give a model or checkpoint folder that "
                            "exists, 'default', vllm:PATH, openai:MODEL or replay:FILE")
    checked = {k: val for k, val in config.items() if k not in errors}
    for name, problem in BenchmarkConfig(**checked).errors().items():
        errors.setdefault(name if name in NAMES else GENERAL, problem if name in NAMES else f"{name}: {problem}")
    return (None, errors) if errors else (config, {})


def form_problems(store: Any, values: dict[str, Any]) -> tuple[Optional[dict[str, Any]], dict[str, str]]:
    """form_config, then what only reading can tell (the profiles resolved, the prompt pack, the simulated
    user, the policy's folder) on the fields that passed: every field's problem named at once."""
    from trainer.benchmarking.benchmark import BenchmarkConfig
    from trainer.benchmarking.checks import benchmark_problems

    config, errors = form_config(values)
    v = {**DEFAULTS, **values}
    read = form_config({n: (DEFAULTS[n] if n in errors else v[n]) for n in NAMES})[0]
    if read is None:  # a default the form cannot take; nothing more to read
        return config, errors
    for name, problem in benchmark_problems(store, BenchmarkConfig(**read)).items():
        if name not in errors:
            errors.setdefault(name if name in NAMES else GENERAL, problem if name in NAMES else f"{name}: {problem}")
    return (None, errors) if errors else (config, {})


def expected_text(store: Any, values: dict[str, Any]) -> str:
    """What the form's benchmark is expected to take, before Start: 'Expected: about 30 s (1 dialogue
    × 10 replies × 16 tokens at 7.8 tok/s, ...)'. Erring long (trainer.benchmarking.progress.expected_seconds)."""
    from simulator.personas.specs import PersonaSpecError
    from trainer.benchmarking.checks import first_profiles
    from trainer.benchmarking.progress import DEFAULT_PACE, duration_text, expected_seconds, last_pace
    from trainer.benchmarking.protocol import LOCAL_REPLY_CAP, protocol_rules

    config, _ = form_config(values)
    if config is None:
        return ""
    try:
        n = len(first_profiles(config["profiles"], config["limit"], store))
    except (PersonaSpecError, ValueError):
        return ""
    pace = last_pace(store, config["policy"]) or (DEFAULT_PACE if config["policy"] == "default" else None)
    if pace is None:
        return ("Expected time: unknown until this policy has run here once; the job shows its time left as it "
                "runs.")
    cap, turns = config["max_new_tokens"] or LOCAL_REPLY_CAP, protocol_rules().max_turns
    seconds = expected_seconds(n, turns, cap, pace)
    tokens = min(cap, pace.get("reply_tokens") or cap)
    return (f"Expected: about {duration_text(seconds)} ({n} dialogue{'s' if n != 1 else ''} × {turns} "
            f"replies × {tokens:.0f} tokens at {pace['tokens_per_s']:.1f} tok/s, {pace['source']}; a busy machine "
            "takes longer).")


def error_texts(errors: dict[str, str]) -> tuple[list[str], str]:
    """(one message per field in NAMES order, '' when fine; the message for settings the form lacks)."""
    return [f"⚠ {md(errors[n])}" if n in errors else "" for n in NAMES], md(errors.get(GENERAL, ""))


def start(store: Any, store_url: str, values: dict[str, Any]) -> tuple[Optional[int], dict[str, str], str]:
    """(job id or None, per-field problems, the message under Start) for the form's values: a job is
    launched only when every field is valid and the profiles resolve."""
    from trainer.benchmarking.benchmark import start_benchmark_job

    config, errors = form_problems(store, values)
    if config is None:
        return None, errors, f"Not started: fix the {len(errors)} field(s) marked ⚠."
    try:
        job_id = start_benchmark_job(store, store_url, config)
    except ValueError as exc:  # BenchmarkInputError names its field first ("profiles: ...")
        field, _, problem = str(exc).partition(": ")
        key = field if field in NAMES else GENERAL
        return None, {key: problem if key != GENERAL else str(exc)}, "Not started: fix the field marked ⚠."
    except OSError as exc:
        return None, {}, f"Not started: the job could not be launched ({md(exc)})."
    n = "every" if not config["limit"] else f"the first {config['limit']}"
    from app.services.job_wait import expectation_with_wait, queue_wait

    behind, wait = queue_wait(store, job_id)
    if behind:  # it waits its turn: say so, behind what, and how long with the wait
        return job_id, {}, (f"Benchmark job #{job_id} is **{md(behind)}** on {n} profile(s) of "
                            f"{md(config['profiles'])}: it starts when there is room (every job is in the Jobs "
                            f"list). {expectation_with_wait(expected_text(store, values), wait)}")
    return job_id, {}, (f"Benchmark job #{job_id} started on {n} profile(s) of {md(config['profiles'])}; its "
                        "progress is below and its run joins the leaderboard when it finishes.")


def eval_run_of_job(store: Any, job_id: int) -> Optional[int]:
    """The eval run a benchmark job plays (None before the job has opened one)."""
    from sqlalchemy import select

    from storage import EvalRun, read_scope

    with read_scope(store) as s:
        return s.scalars(select(EvalRun.id).where(EvalRun.job_id == job_id).order_by(EvalRun.id)).first()


def job_progress_line(store: Any, job: dict[str, Any]) -> str:
    """What a benchmark job is doing now: its eval run's dialogues and replies done, tokens per second and
    time left; before the run opens, what the job's log says it is doing (loading the policy, say)."""
    from trainer.benchmarking.progress import progress_text, run_progress
    from trainer.benchmarking.protocol import protocol_rules

    run_id = eval_run_of_job(store, int(job["id"]))
    if run_id is not None:
        text = progress_text(run_progress(store, run_id, protocol_rules().max_turns))
        return f"eval run {run_id}: {text}" if text else ""
    from app.services.job_wait import queue_wait

    if waiting := queue_wait(store, int(job["id"]))[0]:
        return waiting
    if job.get("status") in ("queued", "running", "stalled"):
        return "starting: loading the policy and the simulated users (no dialogue has begun yet)"
    return ""


def job_rows(store: Any, jobs: list[dict[str, Any]]) -> list[list[Any]]:
    """The benchmark jobs table (app.services.training.JOB_HEADERS) with each job's progress in dialogues,
    replies and time left rather than the job's coarse step counter."""
    from app.services.training import JOB_HEADERS, jobs_rows

    rows = jobs_rows(jobs)
    at = JOB_HEADERS.index("progress")
    for row, job in zip(rows, jobs):
        row[at] = job_progress_line(store, job) or row[at]
    return rows


def job_details(store: Any, job_id: Optional[int]) -> str:
    """A benchmark job's details (Markdown): status, progress, the whole reason when it failed, log tail."""
    from app.services.training import job_summary_md
    from trainer.jobs import queue as job_queue

    detail = job_queue.job_detail(store, int(job_id), log_lines=60) if job_id else None
    if detail is None:
        return "Click a benchmark job to see its progress, its reason if it failed, and its log."
    progress = job_progress_line(store, detail)
    log_tail = readable_log(detail.get("log_tail") or "", max_lines=8).strip()
    parts = [job_summary_md(detail)] + ([f"**Now:** {md(progress)}"] if progress else [])
    if log_tail:
        parts.append("log (last lines):\n\n" + fenced(log_tail))
    return "\n\n".join(parts)


def resume_job(store: Any, store_url: str, job_id: Optional[int]) -> str:
    """Resume a stopped benchmark job (interrupted, failed, cancelled or dead) under its id: it plays only the
    dialogues its eval run still lacks, each with the seed of its identity, so the result equals an uninterrupted
    run. A job whose owner process still lives is refused, naming it."""
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    if job_id is None:
        return "Click a benchmark job in the table first."
    detail = job_queue.job_detail(store, int(job_id))
    if detail is None or detail.get("kind") != "benchmark":
        return f"Job #{job_id} is not a benchmark job."
    if detail["status"] not in job_queue.RESUMABLE:
        owner = f" (process {detail['pid']})" if detail.get("pid") and detail["status"] in ("running", "stalled") else ""
        return (f"Job #{job_id} is {detail['status']}{owner}: only an interrupted, failed, cancelled or dead job "
                "resumes.")
    try:
        job_control.resume(store, store_url, int(job_id))
    except (job_queue.JobError, OSError) as exc:
        return md(f"Job #{job_id} was not resumed: {exc}")
    return f"Resumed job #{job_id}: it plays only the dialogues still missing."
