"""Run an experiment (trainer/experiments/grid.py) to its end: the cells' training jobs, then each cell's held-out
benchmark job on its final checkpoint, then the judge on that eval run when the grid names one.

    run_experiment(store, store_url, experiment_id) -> exit status

Every cell goes queued -> training -> benchmarking [-> judging] -> succeeded (or failed / cancelled). The jobs
are the lab's ordinary jobs (trainer.jobs.queue.launch: OS processes run by trainer.job_runner), so they show in
the Training and Benchmark views and follow the store's job queue (one job runs at a time per store; with
`parallel` N, up to N cells have their jobs launched and waiting in that queue). All the state is in the
store: a killed runner loses nothing, and `python -m trainer experiment --resume ID` picks up where it was
(jobs still running are waited for, stopped ones reopened, a training job continuing from its checkpoint).
The runner owns the experiment in the store, with its pid, host and heartbeat (trainer.experiments.owner), as a Ray
job's process owns its job: a second runner, on any machine, is refused while it lives, and an experiment stored
as running whose runner is gone shows as "dead" when read (trainer.experiments.grid), resumable from anywhere.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

from sqlalchemy import select

from storage import EvalRun, Experiment, ExperimentCell, Store, read_scope, session_scope
from storage.models import utcnow
from trainer.experiments.grid import CELL_FINAL, ExperimentError, experiment_detail, experiment_row, runners_root
from trainer.experiments.owner import RunnerHeartbeat, claim_runner, release_runner
from trainer.job_runner import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK
from trainer.jobs import control as job_control
from trainer.jobs import queue as job_queue
from trainer.jobs.commands import start_command
from trainer.jobs.liveness import admission_error

POLL_S = 1.0
IN_FLIGHT = ("training", "benchmarking", "judging")
Log = Callable[[str], None]


def run_experiment(store: Store, store_url: str, experiment_id: int, log: Log = print,
                   poll_s: float = POLL_S) -> int:
    """Move the cells along until every one is final (or the experiment is cancelled); exit status 0 all
    succeeded, 1 some failed, 143 cancelled. ExperimentError when another live runner holds it or it is done."""
    heartbeat = _claim(store, experiment_id)
    try:
        while True:
            if heartbeat.lost:
                log(f"experiment {experiment_id}: another runner took it over; this one stops")
                return EXIT_FAILED
            exp = experiment_detail(store, experiment_id)
            if exp["status"] == "cancelled":
                log(f"experiment {experiment_id} cancelled")
                return EXIT_CANCELLED
            in_flight = sum(c["status"] in IN_FLIGHT for c in exp["cells"])
            for cell in exp["cells"]:
                if cell["status"] in CELL_FINAL:
                    continue
                if cell["status"] == "queued":
                    if in_flight >= exp["parallel"]:
                        continue
                    in_flight += 1
                _advance(store, store_url, exp, cell, log)
            cells = experiment_detail(store, experiment_id)["cells"]
            if all(c["status"] in CELL_FINAL for c in cells):
                return _finish(store, experiment_id, cells, log)
            time.sleep(poll_s)
    finally:
        heartbeat.stop()
        release_runner(store, experiment_id, os.getpid())


def _claim(store: Store, experiment_id: int) -> RunnerHeartbeat:
    """Take the experiment in the store (refused while another live runner holds it, on any host), mark it
    running and start the runner's heartbeat."""
    with session_scope(store) as s:
        exp = experiment_row(s, experiment_id)
        if exp.status in ("succeeded", "failed", "cancelled"):
            raise ExperimentError({"experiment": f"{experiment_id} is {exp.status}; resume it to run what did "
                                                 "not finish"})
        holder = claim_runner(exp, os.getpid())
        if holder:
            raise ExperimentError({"experiment": f"{experiment_id} is already run by live {holder}"})
        exp.status, exp.finished_at = "running", None
    return RunnerHeartbeat(store, experiment_id, os.getpid()).start()


def _finish(store: Store, experiment_id: int, cells: list[dict[str, Any]], log: Log) -> int:
    failed = [c for c in cells if c["status"] == "failed"]
    cancelled = [c for c in cells if c["status"] == "cancelled"]
    status = "failed" if failed else "cancelled" if cancelled else "succeeded"
    error = "; ".join(f"cell {c['index'] + 1} ({c['label']}): {c['error']}" for c in failed + cancelled)
    with session_scope(store) as s:
        exp = s.get(Experiment, experiment_id)
        if exp.status != "cancelled":
            exp.status, exp.error, exp.finished_at = status, error[:4000], utcnow()
        status = exp.status
    log(f"experiment {experiment_id} {status}" + (f": {error}" if error else ""))
    return {"succeeded": EXIT_OK, "cancelled": EXIT_CANCELLED}.get(status, EXIT_FAILED)


# ---------------------------------------------------------------------------------------------- one cell
def _advance(store: Store, store_url: str, exp: dict[str, Any], cell: dict[str, Any], log: Log) -> None:
    """One look at a cell: start its next job, or take note of the one that ended."""
    where = f"cell {cell['index'] + 1} ({cell['label']})"
    if cell["train_job_id"] is None:
        config = cell["config"]
        job_id = _create_job(store, "train", config, f"{exp['name']} · {cell['label']}", int(config.get("seed", 0)))
        if job_id is None:
            return
        _start(store, store_url, cell["id"], "training", {"train_job_id": job_id}, job_id, log, where)
        return
    if cell["benchmark_job_id"] is None:
        job = _job(store, cell["train_job_id"])
        if _waiting(store, store_url, cell, "training", job, log, where):
            return
        if job["status"] != "succeeded":
            return _stop(store, cell["id"], job, "training", log, where)
        last = job_queue.last_checkpoint(store, job["id"])
        if last is None:
            return _set(store, cell["id"], status="failed", error=f"training job #{job['id']} left no checkpoint")
        config = _benchmark_config(exp, cell, last["path"])
        bench_id = _create_job(store, "benchmark", config, config["name"], config["seed"])
        if bench_id is None:
            return
        _start(store, store_url, cell["id"], "benchmarking", {"benchmark_job_id": bench_id}, bench_id, log, where)
        return
    job = _job(store, cell["benchmark_job_id"])
    if _waiting(store, store_url, cell, "benchmarking", job, log, where):
        return
    if job["status"] != "succeeded":
        return _stop(store, cell["id"], job, "benchmark", log, where)
    with read_scope(store) as s:
        run = s.scalars(select(EvalRun).where(EvalRun.job_id == job["id"]).order_by(EvalRun.id.desc())).first()
        run_id, score = (run.id, run.score) if run else (None, None)
    if run_id is None:
        return _set(store, cell["id"], status="failed", error=f"benchmark job #{job['id']} recorded no eval run")
    note = ""
    if exp["judge"]:
        _set(store, cell["id"], status="judging", eval_run_id=run_id)
        note = judge_eval_run(store, exp["judge"], run_id)
    _set(store, cell["id"], status="succeeded", eval_run_id=run_id, error=note)
    log(f"{where}: held-out score {score} (eval run {run_id})" + (f"; {note}" if note else ""))


def _create_job(store: Store, kind: str, config: dict[str, Any], name: str, seed: int) -> Optional[int]:
    """A cell's next job, or None while the owner's ceiling of live jobs is reached (--max-live-jobs, for a
    runner the web started): the cell waits its turn and is looked at again at the next poll."""
    try:
        return job_queue.create_job(store, kind, config, name=name, seed=seed)
    except job_queue.JobError:
        if admission_error(store):
            return None
        raise


def _waiting(store: Store, store_url: str, cell: dict[str, Any], phase: str, job: dict[str, Any], log: Log,
             where: str) -> bool:
    """True while the cell's job is still to run (queued, running or stalled: its owner is alive), launched
    when it was never started (created or reopened). A dead job is reaped (recorded interrupted with the
    reason); one that never started (its process died before taking the job) is launched again, having
    done nothing."""
    if job["status"] == "dead":
        job_queue.reap_dead_jobs(store)
        job = _job(store, job["id"])
    if job["status"] == "interrupted" and job["started_at"] is None:
        try:
            job_control.reopen(store, job["id"])
        except job_queue.JobError:
            return True  # its process is still letting go of the job: look again next time
        log(f"{where}: job #{job['id']} did not come up in time ({job['error']}); launching it again")
        job = _job(store, job["id"])
    if job["status"] == "queued" and job["pid"] is None and not job["backend_job_id"]:  # never launched
        _start(store, store_url, cell["id"], phase, {}, job["id"], log, where)
        return True
    if job["status"] in ("queued", "running", "stalled"):
        if cell["status"] != phase:
            _set(store, cell["id"], status=phase)
        return True
    return False


def _start(store: Store, store_url: str, cell_id: int, phase: str, links: dict[str, int], job_id: int, log: Log,
           where: str) -> None:
    """Record the job on the cell, then launch it, unless the experiment was cancelled meanwhile."""
    with session_scope(store) as s:
        cell = s.get(ExperimentCell, cell_id)
        stopped = cell.experiment.status == "cancelled" or cell.status == "cancelled"
        for key, value in links.items():
            setattr(cell, key, value)
        if not stopped:
            cell.status = phase
    if stopped:
        job_control.cancel(store, job_id)
        return
    try:
        job_queue.launch(store_url, job_id)
        log(f"{where}: {phase} (job #{job_id})")
    except (job_queue.JobError, OSError) as exc:
        if _job(store, job_id)["status"] in ("queued", "running"):  # launched already (by a runner before this one)
            log(f"{where}: job #{job_id}: {exc}")
            return
        _set(store, cell_id, status="failed", error=f"job #{job_id} could not start: {exc}")


def _stop(store: Store, cell_id: int, job: dict[str, Any], what: str, log: Log, where: str) -> None:
    status = "cancelled" if job["status"] == "cancelled" else "failed"
    hint = "; resume the experiment to continue it" if job["status"] == "interrupted" else ""
    error = f"{what} job #{job['id']} {job['status']}" + (f": {job['error']}" if job["error"] else "") + hint
    _set(store, cell_id, status=status, error=error[:2000])
    log(f"{where}: {error}")


def _job(store: Store, job_id: int) -> dict[str, Any]:
    return job_queue.get_job(store, job_id)


def _set(store: Store, cell_id: int, **values: Any) -> None:
    with session_scope(store) as s:
        cell = s.get(ExperimentCell, cell_id)
        if cell.status == "cancelled" and values.get("status") not in (None, "cancelled"):
            return  # cancelled while we looked: the cancel wins
        for key, value in values.items():
            setattr(cell, key, value)


def _benchmark_config(exp: dict[str, Any], cell: dict[str, Any], checkpoint: str) -> dict[str, Any]:
    """The held-out benchmark of a cell: the experiment's settings with the cell's checkpoint as the policy
    (and the cell's mode unless the experiment sets one)."""
    from trainer.benchmarking.benchmark import BenchmarkConfig

    settings = dict(exp["benchmark"])
    settings.setdefault("mode", cell["config"].get("mode", "direct"))
    settings.setdefault("name", f"{exp['name']} · {cell['label']}")
    return BenchmarkConfig.from_dict({**settings, "policy": checkpoint}).to_dict()


def judge_eval_run(store: Store, judge: dict[str, Any], eval_run_id: int) -> str:
    """Rate an eval run's dialogues with the social-cognition judge (stored per dialogue); '' when every one
    was judged, else a note of what failed (the cell still succeeds: its benchmark stands)."""
    from simulator.evaluation.judge import DEFAULT_PROMPT_VERSION, Judge
    from simulator.evaluation.judge_store import judge_and_store, select_dialogues
    from simulator.user.backends import make_backend

    try:
        backend = make_backend(f"openai:{judge['model']}", base_url=judge.get("base_url"),
                               temperature=judge.get("temperature", 0.0), max_tokens=judge.get("max_tokens", 1024),
                               max_in_flight=judge.get("max_in_flight", 8))
        report = judge_and_store(store, Judge(backend, prompt_version=judge.get("prompt_version",
                                                                                 DEFAULT_PROMPT_VERSION)),
                                 select_dialogues(store, eval_run_id=eval_run_id))
    except Exception as exc:  # an unreachable judge must not lose the cell's benchmark
        return f"judge: {type(exc).__name__}: {exc}"
    failed = report["judged"] - report["ok"]
    return f"judge: {failed} of {report['judged']} dialogue(s) not judged ({report['errors']})" if failed else ""


# ---------------------------------------------------------------------------------------- background runs
def launch_runner(store: Store, store_url: str, experiment_id: int) -> int:
    """Start `python -m trainer experiment --resume ID` as a background process (it outlives the app);
    its output goes to lab_home()/experiments/<store id>/<id>.log. Returns the pid."""
    folder = runners_root(store)
    folder.mkdir(parents=True, exist_ok=True)
    proc = start_command(store_url, ["experiment", "--resume", str(experiment_id)],
                         folder / f"{experiment_id}.log", f"reap-experiment-{experiment_id}")
    return proc.pid


def runner_alive(exp: dict[str, Any]) -> bool:
    """Is a live process running this experiment (holding its owner lock; see experiments._with_runner)?"""
    return exp.get("runner") is not None


def experiment_result(store: Store, experiment_id: int) -> Optional[dict[str, Any]]:
    """The experiment as `--json` prints it: id, name, status, error and per cell its params, status, jobs,
    eval run and held-out score / success / failure / n / 95% interval."""
    exp = experiment_detail(store, experiment_id)
    if exp is None:
        return None
    run_ids = [c["eval_run_id"] for c in exp["cells"] if c["eval_run_id"]]
    with read_scope(store) as s:
        runs = {r.id: r for r in s.scalars(select(EvalRun).where(EvalRun.id.in_(run_ids)))} if run_ids else {}
        scores = {i: {k: getattr(r, k) for k in ("score", "success", "failure", "n", "ci_low", "ci_high")}
                  for i, r in runs.items()}
    cells = [{"index": c["index"], "params": c["params"], "status": c["status"], "error": c["error"],
              "train_job_id": c["train_job_id"], "benchmark_job_id": c["benchmark_job_id"],
              "eval_run_id": c["eval_run_id"], **scores.get(c["eval_run_id"], {})} for c in exp["cells"]]
    return {"experiment_id": exp["id"], "name": exp["name"], "status": exp["status"], "error": exp["error"],
            "code_version": exp["code_version"], "cells": cells}
