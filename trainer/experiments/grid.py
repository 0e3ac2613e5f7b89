"""Experiments: a grid over TrainConfig fields, each cell trained as an ordinary job and its final checkpoint
benchmarked on a held-out set. This module reads and checks grid files and keeps experiments in the store
(create, list, read, cancel, reopen for a resume); trainer/experiments/runner.py moves the cells along.

A grid file (YAML):

    name: algo-x-mode
    base_config: configs/learning-curve-cpu.yaml   # optional; relative to the grid file's folder
    base: {steps: 20}                              # optional inline TrainConfig fields, over base_config
    grid: {algorithm: [grpo, ppo], mode: [direct, think]}   # cartesian product, first field slowest
    benchmark: {profiles: builtin:heldout, simulator: offline, max_new_tokens: 48}   # BenchmarkConfig fields
    judge: {model: gpt-4.1, base_url: http://...}   # optional: the social-cognition judge on each eval run
    parallel: 1                                     # cells in flight at once

The benchmark's policy is the cell's final checkpoint and its mode the cell's mode unless the benchmark
block sets one. Every problem is reported at once, each naming the key (and the cell) it concerns.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml
from sqlalchemy import select
from sqlalchemy.orm import Session

from simulator.access import current_access
from simulator.personas.profile import FieldErrors
from storage import (
    Experiment,
    ExperimentCell,
    Store,
    as_dict,
    code_version,
    get_or_raise,
    lab_home,
    read_scope,
    session_scope,
    store_id,
)
from storage.db import PROJECT_ROOT
from storage.models import utcnow
from trainer.experiments.owner import describe_runner
from trainer.jobs.liveness import admission_error, runner_lives

GRID_KEYS = ("name", "base_config", "base", "grid", "benchmark", "judge", "parallel")
JUDGE_KEYS = ("model", "base_url", "temperature", "max_tokens", "prompt_version", "max_in_flight")
BENCHMARK_DEFAULTS = {"profiles": "builtin:heldout", "simulator": "offline"}
CELL_FINAL = ("succeeded", "failed", "cancelled")
EXPERIMENT_FINAL = ("succeeded", "failed", "cancelled")


class ExperimentError(FieldErrors):
    """A grid that cannot run, or an experiment that cannot be changed in its state; `errors` maps each key
    (e.g. 'grid.algorithm', 'cell 3 (algorithm=ppo, mode=think): group_size') to its problem."""


@dataclass
class ExperimentSpec:
    """A checked grid file: the base config, the grid, the held-out benchmark and the judge."""

    name: str
    base: dict[str, Any]
    grid: dict[str, list[Any]]
    benchmark: dict[str, Any]
    judge: dict[str, Any] = field(default_factory=dict)
    parallel: int = 1
    source: str = ""

    def cells(self) -> list[dict[str, Any]]:
        """The grid's cells in order: one {field: value} per point of the cartesian product."""
        return expand(self.grid)


def expand(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The cartesian product of the grid, the first field changing slowest; {} gives one empty cell."""
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(grid[k] for k in keys))]


def cell_label(params: dict[str, Any]) -> str:
    """'algorithm=grpo, mode=think' (or 'base' for the single cell of an empty grid)."""
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "base"


def parse_grid(text: str, folder: Optional[Path] = None, check_paths: bool = True) -> ExperimentSpec:
    """An ExperimentSpec from a grid file's text; ExperimentError listing every problem. `folder` is where
    a relative base_config is looked for (the grid file's folder; the project root for a text box)."""
    from trainer.config import ConfigError, TrainConfig

    folder = Path(folder or PROJECT_ROOT)
    try:
        data = yaml.safe_load(text or "")
    except yaml.YAMLError as exc:
        raise ExperimentError({"grid file": f"not valid YAML ({str(exc).splitlines()[0]})"}) from None
    except RecursionError:  # a visitor's '[[[[...': one line, never the interpreter's words
        raise ExperimentError({"grid file": "not valid YAML (nested too deeply)"}) from None
    if not isinstance(data, dict):
        raise ExperimentError({"grid file": "must be a mapping with name, grid, benchmark, ..."})
    errors = {k: f"unknown key; one of {', '.join(GRID_KEYS)}" for k in data if k not in GRID_KEYS}
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        errors["name"] = "required: a name for the experiment"
    base = _base_fields(data, folder, errors)
    grid = data.get("grid") or {}
    if not isinstance(grid, dict):
        errors["grid"] = "must map TrainConfig fields to lists of values"
        grid = {}
    known = set(TrainConfig().to_dict())
    for key, values in grid.items():
        if key not in known:
            errors[f"grid.{key}"] = "not a TrainConfig field"
        elif key == "output_dir":
            errors[f"grid.{key}"] = "each cell's job has its own folder; output_dir cannot vary"
        elif not isinstance(values, list) or not values:
            errors[f"grid.{key}"] = f"must be a non-empty list of values, got {values!r:.60}"
    if base.get("output_dir"):
        errors["base.output_dir"] = "must be empty: each cell's job has its own folder"
    parallel = data.get("parallel", 1)
    if not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1:
        errors["parallel"] = f"must be a whole number >= 1, got {parallel!r}"
    elif problem := current_access().bound_error("parallel", parallel):
        errors["parallel"] = problem
    benchmark = _benchmark_fields(data.get("benchmark"), errors)
    judge = _judge_fields(data.get("judge"), errors)
    # the cells are checked even when the file has other problems, over the grid keys that are well formed,
    # so every problem is named at once (an unknown algorithm beside a bad `parallel`)
    checkable = {k: v for k, v in grid.items() if f"grid.{k}" not in errors}
    if problem := current_access().bound_error("cells", math.prod(len(v) for v in checkable.values())):
        errors["cells"] = problem  # counted before a cell is built: a grid of 10^10 cells is never enumerated
        checkable = {}
    spec = ExperimentSpec(name=(name or "").strip() if isinstance(name, str) else "", base=base, grid=checkable,
                          benchmark=benchmark, judge=judge, parallel=parallel, source=text)
    for i, params in enumerate(spec.cells(), start=1):
        where = f"cell {i} ({cell_label(params)})"
        try:
            config = TrainConfig.from_dict({**base, **params})
        except ConfigError as exc:
            errors.update({f"{where}: {k}": v for k, v in exc.errors.items()})
            continue
        errors.update({f"{where}: {k}": v for k, v in config.errors(check_paths=check_paths).items()})
    if errors:
        raise ExperimentError(errors)
    return spec


def load_grid(path: str | Path, check_paths: bool = True) -> ExperimentSpec:
    """parse_grid of a file (relative base_config paths from the file's folder)."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentError({"grid file": f"{str(path)!r} not found"})
    return parse_grid(path.read_text(encoding="utf-8"), path.resolve().parent, check_paths)


def _base_fields(data: dict[str, Any], folder: Path, errors: dict[str, str]) -> dict[str, Any]:
    base: dict[str, Any] = {}
    ref = data.get("base_config")
    if ref not in (None, ""):
        path = Path(str(ref)).expanduser()
        path = path if path.is_absolute() else folder / path
        if problem := current_access().path_error("base_config", path):  # before it is looked at: no
            errors["base_config"] = problem  # existence, key or value of a refused file is ever said
            return base
        try:
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        except yaml.YAMLError as exc:
            loaded = None
            errors["base_config"] = f"{path} is not valid YAML ({str(exc).splitlines()[0]})"
        if loaded is None and "base_config" not in errors:
            errors["base_config"] = f"file {str(path)!r} not found or empty"
        elif isinstance(loaded, dict):
            base.update(loaded)
        elif loaded is not None:
            errors["base_config"] = f"{path} must hold a mapping of TrainConfig fields"
    inline = data.get("base") or {}
    if not isinstance(inline, dict):
        errors["base"] = "must be a mapping of TrainConfig fields"
    else:
        base.update(inline)
    return base


def _benchmark_fields(block: Any, errors: dict[str, str]) -> dict[str, Any]:
    """The held-out benchmark's BenchmarkConfig fields (its policy is each cell's checkpoint)."""
    from simulator.personas.specs import spec_error
    from trainer.benchmarking.benchmark import BenchmarkConfig

    if block is None:
        block = {}
    if not isinstance(block, dict):
        errors["benchmark"] = "must be a mapping of benchmark settings (profiles, simulator, ...)"
        return {}
    known = set(BenchmarkConfig().to_dict()) - {"policy"}
    for key in block:
        if key not in known:
            errors[f"benchmark.{key}"] = ("set by the experiment: each cell's final checkpoint" if key == "policy"
                                          else "not a benchmark setting")
    values = {**BENCHMARK_DEFAULTS, **{k: v for k, v in block.items() if k in known}}
    problems = BenchmarkConfig(**{**values, "policy": "default"}).errors()
    if "profiles" not in problems and spec_error(values["profiles"]):
        problems["profiles"] = spec_error(values["profiles"])
    errors.update({f"benchmark.{k}": v for k, v in problems.items()})
    return values


def _judge_fields(block: Any, errors: dict[str, str]) -> dict[str, Any]:
    if block in (None, {}, ""):
        return {}
    if not isinstance(block, dict):
        errors["judge"] = "must be a mapping: {model: NAME, base_url: URL}"
        return {}
    for key in block:
        if key not in JUDGE_KEYS:
            errors[f"judge.{key}"] = f"unknown judge setting; one of {', '.join(JUDGE_KEYS)}"
    if not isinstance(block.get("model"), str) or not block["model"].strip():
        errors["judge.model"] = "required: the judge model at the endpoint"
    base_url = block.get("base_url")
    if base_url is not None and not isinstance(base_url, str):
        errors["judge.base_url"] = "must be an endpoint name or URL"
    elif problem := current_access().endpoint_error("judge.base_url", base_url):  # the owner's endpoints
        errors["judge.base_url"] = problem
    return {k: v for k, v in block.items() if k in JUDGE_KEYS}


# ----------------------------------------------------------------------------------------------- the store
def create_experiment(store: Store, spec: ExperimentSpec) -> int:
    """Record a queued experiment and its cells (nothing runs until experiment_runner.run_experiment).
    ExperimentError on `jobs` when a web caller has no room under the owner's ceiling of live jobs for its
    runner and first cell (trainer.jobs.liveness.admission_error)."""
    from trainer.config import TrainConfig

    if problem := admission_error(store, needed=2):
        raise ExperimentError({"jobs": problem})

    with session_scope(store) as s:
        exp = Experiment(name=spec.name, base=spec.base, grid=spec.grid, benchmark=spec.benchmark, judge=spec.judge,
                         parallel=spec.parallel, source=spec.source, status="queued", code_version=code_version())
        s.add(exp)
        s.flush()
        for i, params in enumerate(spec.cells()):
            config = TrainConfig.from_dict({**spec.base, **params}).to_dict()
            s.add(ExperimentCell(experiment_id=exp.id, index=i, params=params, config=config))
        return exp.id


def experiment_row(session: Session, experiment_id: int) -> Experiment:
    """The experiment's row; ExperimentError naming the id when there is none."""
    return get_or_raise(session, Experiment, experiment_id, what="",
                        error=lambda message: ExperimentError({"experiment": message}))


def runners_root(store: Store) -> Path:
    """Where experiment runners started by this machine keep their logs (one folder per store)."""
    return lab_home() / "experiments" / store_id(store)


def _with_runner(row: dict[str, Any]) -> dict[str, Any]:
    """`runner`: the pid of the live runner of the experiment (on `runner_host`), or None (trainer.experiments.owner:
    from the store, whatever machine reads it). An experiment stored as running with no live runner shows as "dead"
    (derived, as for jobs: trainer.jobs.liveness); resume continues it, from any machine."""
    alive = runner_lives(row["runner_pid"], row["runner_host"], row["runner_heartbeat_at"])
    row["stored_status"], row["runner"] = row["status"], row["runner_pid"] if alive else None
    if row["status"] == "running" and not alive:
        row["status"] = "dead"
        row["error"] = row["error"] or "dead: no live runner holds the experiment; resume continues it"
    return row


def list_experiments(store: Store, limit: int = 100) -> list[dict[str, Any]]:
    """Newest first, as plain dicts (every Experiment column, `n_cells` and `runner`; see _with_runner)."""
    with read_scope(store) as s:
        rows = list(s.scalars(select(Experiment).order_by(Experiment.id.desc()).limit(limit)))
        return [_with_runner({**as_dict(e), "n_cells": len(e.cells)}) for e in rows]


def experiment_detail(store: Store, experiment_id: int) -> Optional[dict[str, Any]]:
    """The experiment's columns, `runner` (see _with_runner) and `cells` (each with its jobs' shown status),
    or None when it does not exist."""
    from trainer.jobs import queue as job_queue

    with read_scope(store) as s:
        exp = s.get(Experiment, experiment_id)
        if exp is None:
            return None
        out = _with_runner(as_dict(exp))
        cells = [(as_dict(c), cell_label(c.params)) for c in exp.cells]
    status = {j: (job_queue.get_job(store, j) or {}).get("status", "") for c, _ in cells
              for j in (c["train_job_id"], c["benchmark_job_id"]) if j}
    out["cells"] = [{**c, "label": label, "train_status": status.get(c["train_job_id"], ""),
                     "benchmark_status": status.get(c["benchmark_job_id"], "")} for c, label in cells]
    return out


def cancel_experiment(store: Store, experiment_id: int) -> str:
    """Cancel the whole experiment: its live jobs get Cancel, cells not finished are marked cancelled and
    the runner stops at its next look. Returns the experiment's status."""
    from trainer.jobs import control as job_control

    with session_scope(store) as s:
        exp = experiment_row(s, experiment_id)
        if exp.status in EXPERIMENT_FINAL:
            return exp.status
        exp.status, exp.finished_at, exp.error = "cancelled", utcnow(), "cancelled"
        _forget_dead_runner(exp)
        live = []
        for cell in exp.cells:
            if cell.status not in CELL_FINAL:
                cell.status = "cancelled"
                live += [j for j in (cell.train_job_id, cell.benchmark_job_id) if j]
    for job_id in live:
        job_control.cancel(store, job_id)
    return "cancelled"


def reopen_experiment(store: Store, experiment_id: int) -> list[int]:
    """Put what did not finish back in the queue for a resume: cells not succeeded go back to queued and
    their stopped jobs are reopened (a training job continues from its last checkpoint). Refused while a
    runner is alive, and for a web caller without room for a runner and a cell (as create_experiment). Returns
    the reopened job ids."""
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    if problem := admission_error(store, needed=2):
        raise ExperimentError({"jobs": problem})

    with read_scope(store) as s:
        exp = experiment_row(s, experiment_id)
        if runner_lives(exp.runner_pid, exp.runner_host, exp.runner_heartbeat_at):
            raise ExperimentError({"experiment": f"{experiment_id} is being run by live "
                                                 f"{describe_runner(exp.runner_pid, exp.runner_host)}"})
        cells = [(c.id, c.status, c.train_job_id, c.benchmark_job_id) for c in exp.cells]
    reopened = []
    for _, status, *job_ids in cells:
        if status == "succeeded":
            continue
        for job_id in job_ids:
            status = (job_queue.get_job(store, job_id) or {}).get("status", "") if job_id else ""
            if status in job_queue.RESUMABLE:  # live ones (queued, running, stalled) are waited for by the runner
                try:
                    job_control.reopen(store, job_id)
                except job_queue.JobError as exc:
                    raise ExperimentError({f"job {job_id}": str(exc)}) from None
                reopened.append(job_id)
    with session_scope(store) as s:
        exp = s.get(Experiment, experiment_id)
        for cell in exp.cells:
            if cell.status != "succeeded":
                cell.status, cell.error = "queued", ""
        exp.status, exp.error, exp.finished_at = "queued", "", None
        _forget_dead_runner(exp)
    return reopened


def _forget_dead_runner(exp: Experiment) -> None:
    """Clear the runner a row names once it is dead (a killed runner's pid must not stay on the row)."""
    if not runner_lives(exp.runner_pid, exp.runner_host, exp.runner_heartbeat_at):
        exp.runner_pid, exp.runner_host, exp.runner_heartbeat_at = None, "", None

