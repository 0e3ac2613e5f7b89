"""A calibration of a simulator to the people of a human set as one job (kind "calibrate"): the simulator's
shadow judgements of every reply the set has that it has not judged yet (the shadow job's own work,
trainer.benchmarking.shadow_jobs, with its progress and time left), then the fit, saved under its name in the
lab's folder (simulator.fitting.calibration_fit).

    job_id = create_calibrate_job(store, settings, "human:esconv", "esconv-offline", folds=5)   # nothing runs
    job_queue.launch(store_url, job_id)     # `python -m trainer job ID` -> RUNNERS["calibrate"] -> calibrate_job

A job killed while judging resumes (`python -m trainer resume ID`, the People view's Resume) with only the
turns not yet judged, each judged as an uninterrupted run judges it, so it ends with the same calibration.
What it saved (name, hash, path, the held-out figures before and after) is recorded in the job's config under
"result"; its stage ("judging", "fitting", "done") under "stage".
"""
from __future__ import annotations

from typing import Any

from simulator.fitting.monotone_map import check_map
from simulator.user.calibration import calibration_path, name_taken
from storage.db import lab_home
from trainer.benchmarking.shadow_jobs import shadow_config, shadow_job
from trainer.jobs.queue import create_job

CALIBRATE_JOB_KIND = "calibrate"
FIGURES = ("spearman", "mean_diff")  # the held-out figures a job's result keeps (the file keeps them all)


def create_calibrate_job(store: Any, settings: dict[str, Any], set_spec: str, name: str, folds: int = 5,
                         seed: int = 0, n_boot: int = 1000, reply_signal: bool = False, method: str = "predict") -> int:
    """Check everything (ValueError naming the option: --name, --map, --folds, --set, --simulator; nothing recorded),
    then record a queued calibrate job: the shadow job's config with the calibration's settings beside it."""
    try:
        calibration_path(name, lab_home())  # a name is a file name in the lab's folder, never a path
    except ValueError as exc:
        raise ValueError(f"--name: {str(exc).removeprefix('calibration: ')}") from None
    if problem := name_taken(name):  # a job never replaces a saved calibration (the command line can: --replace)
        raise ValueError(f"--name: {problem}; choose another name")
    check_map(method)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"--folds: must be a whole number of 2 or more, got {folds!r}")
    config = shadow_config(store, settings, set_spec, seed)
    if folds > len(config["dialogue_ids"]):
        raise ValueError(f"--folds: {folds} folds need at least {folds} dialogues; {set_spec} has "
                         f"{len(config['dialogue_ids'])}")
    config["calibration"] = {"name": name, "folds": folds, "n_boot": int(n_boot), "seed": int(seed),
                             "reply_signal": bool(reply_signal), "map": method}
    return create_job(store, CALIBRATE_JOB_KIND, config,
                      name=f"calibrate {name}: {config['simulator']['spec']} · {set_spec}"[:200], seed=seed)


def brief(result: dict[str, Any]) -> dict[str, Any]:
    """What a job records of a fitted calibration: its name, hash, file, simulator and held-out figures."""
    def figure(side: str, level: str) -> dict[str, Any]:
        return {stat: result[side][level][stat] for stat in FIGURES}

    return {"name": result["name"], "hash": result["hash"], "path": result["path"],
            "simulator_fingerprint_hash": result["simulator_fingerprint_hash"], "n_turns": result["n_turns"],
            "folds": result["folds"], "map": result["map"], **{side: {level: figure(side, level) for level in ("turns", "dialogues")}
                                          for side in ("before", "after", "after_signal") if side in result}}


def calibrate_job(store: Any, ctx: Any) -> dict[str, Any]:
    """The work of a calibrate job (`ctx` a JobContext): judge what is not judged, then fit and save."""
    from simulator.fitting.calibration_fit import fit_and_save

    ctx.record_config("stage", "judging")
    judged = shadow_job(store, ctx)
    if ctx.cancelled or judged["left"]:
        return judged
    ctx.record_config("stage", "fitting")
    c = ctx.config["calibration"]
    result = brief(fit_and_save(store, ctx.config["set"], ctx.config["fingerprint_hash"], c["name"],
                                folds=int(c["folds"]), n_boot=int(c["n_boot"]), seed=int(c["seed"]),
                                reply_signal=bool(c.get("reply_signal", False)),
                                method=str(c.get("map", "predict"))))
    ctx.record_config("result", result)
    ctx.record_config("stage", "done")
    print(f"calibration {result['name']} ({result['hash']}) saved: {result['path']}", flush=True)
    return {**judged, "calibration": result}
