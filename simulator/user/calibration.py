"""A calibration of a simulated user: a fitted, monotone map of its judged emotion change onto people's scale,
plus, optionally, a per-reply signal fitted to people (simulator.user.reply_signal) added to it, applied before
the emotion rules (simulator.user.agent). Fitted by simulator.fitting.monotone_map
(`python -m simulator calibrate`); stored as JSON under its name in the lab's folder (calibrations/NAME.json), or
shipped with the lab in simulator/calibrations/ beside the licence of the data it was fitted on."""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from simulator.user.reply_signal import ReplySignal

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
PACKAGED = Path(__file__).resolve().parent.parent / "calibrations"  # shipped calibrations, each with its notice


@dataclass(frozen=True)
class Calibration:
    """A fitted map of one simulator's per-reply emotion change (before the emotion rules) onto people's scale."""

    name: str
    knots_x: list[float]  # the simulator's change at each knot (increasing)
    knots_y: list[float]  # the calibrated change there (non-decreasing); linear between, flat beyond the ends
    simulator_fingerprint_hash: str = ""  # the simulator whose judgements it was fitted on
    data: dict[str, Any] = field(default_factory=dict)  # what it was fitted on (set, counts, source, licence)
    report: dict[str, Any] = field(default_factory=dict)  # cross-validated before/after figures
    reply_signal: ReplySignal | None = None  # the second level: points of each reply fitted to people

    def apply(self, change: float) -> float:
        return float(np.interp(float(change), self.knots_x, self.knots_y))

    async def calibrate(self, change: float, said: Sequence[str], reply: str) -> tuple[float, dict[str, float]]:
        """The calibrated change of one reply (the map, plus the reply signal's points) and its parts."""
        parts = {"mapped": self.apply(change)}
        if self.reply_signal is not None:
            parts["reply_signal"] = await self.reply_signal.score(said, reply)
        return float(sum(parts.values())), {k: round(v, 3) for k, v in parts.items()}

    def hash(self) -> str:
        """What changes a dialogue: the knots, the reply signal (and the name), not the report."""
        body = json.dumps({"name": self.name, "x": self.knots_x, "y": self.knots_y,
                           **({"signal": self.reply_signal.hash()} if self.reply_signal else {})}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def fingerprint(self) -> dict[str, Any]:
        return {"name": self.name, "hash": self.hash(), "fitted_on": self.simulator_fingerprint_hash}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["reply_signal"] = self.reply_signal.to_dict() if self.reply_signal else None
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Calibration":
        x, y = [float(v) for v in d["knots_x"]], [float(v) for v in d["knots_y"]]
        if not x or len(x) != len(y) or any(b <= a for a, b in zip(x, x[1:])) or any(b < a for a, b in zip(y, y[1:])):
            raise ValueError("calibration: knots_x must increase and knots_y must not decrease, of equal length")
        return cls(name=str(d["name"]), knots_x=x, knots_y=y,
                   simulator_fingerprint_hash=str(d.get("simulator_fingerprint_hash", "")),
                   data=dict(d.get("data") or {}), report=dict(d.get("report") or {}),
                   reply_signal=ReplySignal.from_dict(d["reply_signal"]) if d.get("reply_signal") else None)


def calibration_path(name: str, home: Path) -> Path:
    if not NAME_RE.match(name or ""):
        raise ValueError(f"calibration: {name!r} is not a name (lowercase letters, digits, - and _, at most 64)")
    return home / "calibrations" / f"{name}.json"


def name_taken(name: str, home: Path | None = None) -> str:
    """Why `name` cannot be given to a new calibration without replacing one ("" when it is free)."""
    if home is None:
        from storage.db import lab_home

        home = lab_home()
    if calibration_path(name, home).is_file():
        return f"a calibration named {name!r} already exists in the lab's folder"
    if (PACKAGED / f"{name}.json").is_file():
        return f"{name!r} is the name of a calibration shipped with the lab"
    return ""


def save_calibration(cal: Calibration, home: Path) -> Path:
    path = calibration_path(cal.name, home)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cal.to_dict(), indent=1, ensure_ascii=False))
    tmp.replace(path)  # all or nothing
    return path


def load_calibration(name: str, home: Path | None = None) -> Calibration:
    """A calibration by name: the lab's own (home/calibrations) first, then the shipped ones."""
    if home is None:
        from storage.db import lab_home

        home = lab_home()
    for path in (calibration_path(name, home), PACKAGED / f"{name}.json"):
        if path.is_file():
            return Calibration.from_dict(json.loads(path.read_text()))
    raise ValueError(f"calibration: no calibration named {name!r} (fit one with python -m simulator calibrate)")


def saved_calibrations(home: Path | None = None) -> list[Calibration]:
    """The lab's own calibrations (home/calibrations/*.json), by name; a file that does not read is left out."""
    if home is None:
        from storage.db import lab_home

        home = lab_home()
    found = []
    for path in sorted((home / "calibrations").glob("*.json")):
        try:
            found.append(Calibration.from_dict(json.loads(path.read_text())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found
