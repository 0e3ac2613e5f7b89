"""The Compare view's Start, progress, Cancel and Resume: a comparison run as a background job
(trainer.benchmarking.compare_runs), its status derived from its job (a comparison whose process died shows
dead, never running), its progress in dialogues with the time left."""
from __future__ import annotations

from typing import Any, Optional

from app.render import md
from app.services.job_wait import queue_wait
from storage import Store
from trainer.benchmarking import compare_runs
from trainer.benchmarking.benchmark import BenchmarkInputError
from trainer.benchmarking.compare import CompareConfig, comparison_job
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue

DEFAULT_POLICY = "default"
LIVE = ("running", "queued", "stalled")
RESUMABLE = ("dead", "interrupted", "failed", "cancelled")


def policy_choices(store: Store) -> list[tuple[str, str]]:
    """(label, spec) for A and B: the packaged default model, then the stored training checkpoints (any model
    folder can be typed in as well)."""
    return [("default (the packaged SmolLM2)", DEFAULT_POLICY), *compare_runs.stored_policies(store)]


FIELDS = ("a", "b", "profiles", "simulator", "limit", "seeds", "max_new_tokens", "gpus")  # the Start form's, in order
GENERAL = "_general"


def _int(value: Any, name: str, default: int, errors: dict[str, str]) -> int:
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if number != number or number != int(number):
        errors[name] = f"must be a whole number, got {value!r}"
        return default
    return int(number)


def field_of(problem_key: str) -> str:
    """The form field a comparison problem belongs under (the simulated user's settings under `simulator`)."""
    if problem_key in FIELDS:
        return problem_key
    if problem_key.startswith("simulator") or problem_key == "prompt_pack":
        return "simulator"
    return GENERAL


def bare_name_problem(text: str) -> str:
    """For a policy typed in the web form: a bare name (no folder, no spec kind) is no path the visitor may name
    there, so it is reported as not found, in words that hold whatever exists on the machine (no existence
    oracle); '' for anything else (a spec, a path: checked as usual)."""
    from simulator.access import current_access

    name = (text or "").strip()
    if not current_access().from_web or not name or name == DEFAULT_POLICY or "/" in name or ":" in name:
        return ""
    return (f"{name!r} not found: no stored checkpoint or model folder has that name; pick one from the list, or "
            "type the folder's full path")


def expected_text(store: Store, a: Optional[str], b: Optional[str], spec: Optional[str], limit: Any, seeds: Any,
                  max_new_tokens: Any) -> str:
    """What a comparison is expected to take, before Start: both sides' dialogues at each policy's last pace
    (the benchmark form's estimate, erring long; 'about', never a bound). '' while the form is not valid."""
    from trainer.benchmarking.checks import first_profiles
    from trainer.benchmarking.progress import DEFAULT_PACE, duration_text, expected_seconds, last_pace
    from trainer.benchmarking.protocol import LOCAL_REPLY_CAP, protocol_rules

    errors: dict[str, str] = {}
    n_limit, k, cap = (_int(limit, "limit", 0, errors), _int(seeds, "seeds", 1, errors),
                       _int(max_new_tokens, "max_new_tokens", 0, errors))
    try:
        n = len(first_profiles((spec or "").strip(), n_limit, store))
    except Exception:  # noqa: BLE001  a bad spec: Start names it under its field
        return ""
    if errors or n < 1 or k < 1:
        return ""
    turns, cap = protocol_rules().max_turns, cap or LOCAL_REPLY_CAP
    total, words = 0.0, []
    for side, policy in (("A", (a or "").strip()), ("B", (b or "").strip())):
        pace = last_pace(store, policy) or (DEFAULT_PACE if policy == DEFAULT_POLICY else None)
        if pace is None:
            return (f"Expected time: unknown until {side}'s policy has run here once (a quick look finds out); "
                    f"{2 * n * k} dialogues of up to {turns} replies × {cap} tokens.")
        total += expected_seconds(n * k, turns, cap, pace)
        words.append(f"{side} at {pace['tokens_per_s']:.1f} tok/s")
    return (f"Expected: about {duration_text(total)} (2 sides × {n} persona{'s' if n != 1 else ''} × {k} seed"
            f"{'s' if k != 1 else ''} × {turns} replies × {cap} tokens, {', '.join(words)}; a busy machine takes "
            "longer).")


def start(store: Store, store_url: str, a: Optional[str], b: Optional[str], profiles: Optional[str],
          simulator: Optional[str], limit: Any, seeds: Any, max_new_tokens: Any, gpus: Any = 0
          ) -> tuple[str, Optional[int], dict[str, str]]:
    """Check every input and launch the comparison's job: (message, comparison id or None when refused, the
    problems by form field, every one named at once; GENERAL for those the form has no field of)."""
    errors: dict[str, str] = {}
    numbers = {name: _int(value, name, default, errors) for name, value, default in
               (("limit", limit, 0), ("seeds", seeds, 1), ("max_new_tokens", max_new_tokens, 0), ("gpus", gpus, 0))}
    config = CompareConfig(a=(a or "").strip(), b=(b or "").strip(), profiles=(profiles or "").strip(),
                           simulator=(simulator or "").strip(), **numbers)
    for side, text in (("a", a), ("b", b)):
        if problem := bare_name_problem(text or ""):
            errors[side] = problem
    for key, problem in compare_runs.comparison_problems(store, config).items():
        field = field_of(key)
        if field not in errors:
            errors[field] = problem if field == key else f"{key}: {problem}"
    if errors:
        return f"Not started: fix the {len(errors)} problem(s) marked ⚠.", None, errors
    try:
        comparison_id, job_id = compare_runs.start_comparison_job(store, store_url, config)
    except (BenchmarkInputError, job_queue.JobError) as e:
        return f"Not started: {e}", None, {}
    return f"Comparison #{comparison_id} started (job #{job_id}).", comparison_id, {}


def error_texts(errors: dict[str, str]) -> list[str]:
    """One message per form field (FIELDS order) and the general one last; '' where fine."""
    return [f"⚠ {md(errors[n])}" if n in errors else "" for n in (*FIELDS, GENERAL)]


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "estimating"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


def progress_md(store: Store, comparison_id: Optional[int]) -> str:
    """One line: status, dialogues done of all, the time left (while it runs), what to do when it stopped."""
    if comparison_id is None:
        return ""
    p = compare_runs.comparison_progress(store, comparison_id)
    if not p:
        return f"Comparison #{comparison_id} does not exist."
    waiting = queue_wait(store, p["job_id"])[0]  # its job waits its turn: say behind what, not "running"
    line = f"Comparison #{comparison_id}: **{'queued' if waiting else p['status']}**"
    if waiting:
        return f"{line} · {waiting}"
    if p["total"]:
        line += f" · {p['done']} / {p['total']} dialogues"
    if p["status"] == "running":
        line += f" · time left {_duration(p['left_s'])}"
    if p["status"] in RESUMABLE and p["job_id"] is not None:
        line += " · Resume continues it (only what is missing is played)"
    if p["error"] and p["status"] != "succeeded":
        line += f"\n\n{p['error']}"
    return line


def is_live(store: Store, comparison_id: Optional[int]) -> bool:
    return comparison_id is not None and compare_runs.comparison_progress(store, comparison_id).get("status") in LIVE


def cancel(store: Store, comparison_id: Optional[int]) -> str:
    job = comparison_job(store, comparison_id) if comparison_id is not None else None
    if job is None:
        return "Nothing to cancel: pick a comparison started here or from the command line."
    try:
        return f"Comparison #{comparison_id}: {job_control.cancel(store, job['id'])}."
    except job_queue.JobError as e:
        return f"Not cancelled: {e}"


def resume(store: Store, store_url: str, comparison_id: Optional[int]) -> str:
    if comparison_id is None:
        return "Nothing to resume: pick a comparison."
    try:
        job_id = compare_runs.resume_comparison_job(store, store_url, comparison_id)
    except (BenchmarkInputError, job_queue.JobError) as e:
        return f"Not resumed: {e}"
    return f"Comparison #{comparison_id} resumes (job #{job_id}): only what is missing is played."
