"""Fit a calibration on a human set's shadow judgements and save it: what `python -m simulator calibrate` and a
"calibrate" job (trainer.benchmarking.calibrate_jobs) both do once a simulator has judged the set.

The units of the agreement report (simulator.evaluation.human_agreement) are cross-validated over dialogues
(simulator.fitting.monotone_map; with the reply signal, simulator.fitting.reply_signal_fit too), the report's
tables computed before and after on the held-out folds, the map fitted on every dialogue and saved under its
name in the lab's folder (calibrations/NAME.json: simulator.user.calibration's name rules keep it there)."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Optional

from simulator.evaluation.human_agreement import load_set, tables, units_of
from simulator.fitting.monotone_map import change_by_score, check_map, cross_validate, fit_change_map
from simulator.user.calibration import Calibration, calibration_path, save_calibration


def ids_hash(ids: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def fit_and_save(store: Any, set_spec: str, fp_hash: str, name: str, folds: int = 5, turn_points: float = 5.0,
                 state_points: float = 25.0, n_boot: int = 1000, seed: int = 0, reply_signal: bool = False,
                 home: Optional[Path] = None, method: str = "predict") -> dict[str, Any]:
    """Fit calibration `name` of the simulator whose judgements of `set_spec` are stored under `fp_hash`, save
    it (in `home`, default the lab's folder) and return it with the held-out figures before and after:
    {name, hash, path, simulator_fingerprint_hash, map, knots_x, knots_y, before, after, change_by_score, folds,
    n_turns, n_dialogue_states} (and after_signal, signal_alphas with the reply signal). ValueError naming the
    problem; a bad name is refused before any work."""
    if home is None:
        from storage.db import lab_home

        home = lab_home()
    calibration_path(name, home)
    check_map(method)
    dialogues, sims = load_set(store, set_spec)
    if fp_hash not in sims:
        raise ValueError(f"--simulator: the simulator {fp_hash} has not judged {set_spec}; run python -m trainer "
                         f"shadow --set {set_spec} first")
    units = units_of(dialogues, sims[fp_hash]["deltas"])
    held = cross_validate(units, turn_points, k=folds, seed=seed, method=method)
    figures = {"before": tables(units, n_boot, seed, turn_points, state_points),
               "after": tables(held, n_boot, seed, turn_points, state_points),
               "change_by_score": {"before": change_by_score(units["turns"]), "after": change_by_score(held["turns"])},
               "folds": folds, "n_turns": len(units["turns"]), "n_dialogue_states": len(units["dialogues"])}
    knots = fit_change_map([u["parts"] for u in units["turns"]],
                           [(u["score"] - u["mid"]) * turn_points for u in units["turns"]], method)
    signal = None
    if reply_signal:
        from simulator.fitting.reply_signal_fit import cross_validate_signal, fit_two_levels, reply_feature_rows

        rows = reply_feature_rows(store, units)
        held_signal = cross_validate_signal(units, rows, turn_points, k=folds, seed=seed, method=method)
        figures["after_signal"] = tables(held_signal, n_boot, seed, turn_points, state_points)
        figures["change_by_score"]["after_signal"] = change_by_score(held_signal["turns"])
        figures["signal_alphas"] = held_signal["alphas"]
        _, signal = fit_two_levels(units["turns"], rows, turn_points, seed, method=method)
    data = {"set": set_spec, "n_dialogues": len(dialogues), "n_turns": len(units["turns"]),
            "turn_points_per_step": turn_points, "seed": seed, "map": method,
            "external_ids_hash": ids_hash([d["external_id"] or str(d["id"]) for d in dialogues])}
    cal = Calibration(name, *knots, simulator_fingerprint_hash=fp_hash, data=data, report=figures,
                      reply_signal=signal)
    path = save_calibration(cal, home)
    return {"name": cal.name, "hash": cal.hash(), "path": str(path), "simulator_fingerprint_hash": fp_hash,
            "map": method,
            "knots_x": cal.knots_x, "knots_y": cal.knots_y, **figures}
