"""Experiment tracking: each training step's metrics and sample dialogues, sent to TensorBoard (always, by
default) and to W&B, MLflow or Trackio when `report_to` names them.

    tracking = make_tracking(config, output_dir, run_name, start_step)   # rank 0 only
    tracking.log_step(step, metrics, samples)                            # scalars + dialogues as text
    tracking.close()

Scalars keep the names the job stores (`reward_mean`, `approx_kl`, ...), so the store, TensorBoard and the
trackers show the same series. Where each one writes:
  * tensorboard: `<output_dir>/tensorboard` (a resumed run purges the steps after its checkpoint);
  * wandb: offline unless WANDB_MODE says otherwise (never needs the network), files in WANDB_DIR or
    `<output_dir>`;
    project WANDB_PROJECT (default "rlver-lab");
  * mlflow: MLFLOW_TRACKING_URI, else a SQLite store `<output_dir>/mlflow.db`; experiment
    MLFLOW_EXPERIMENT_NAME (default "rlver-lab"); dialogues as text artifacts;
  * trackio: its local SQLite store under TRACKIO_DIR (default `<lab home>/trackio`); project
    TRACKIO_PROJECT (default "rlver-lab").
A tracker that fails while logging is reported once on stderr and dropped; training goes on.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence

# report_to value -> the package it needs
TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio"}
REPORT_TO = (*TRACKER_PACKAGES, "none")
DEFAULT_PROJECT = "rlver-lab"
TEXT_TAG = "sample_dialogues"  # not "dialogues": that is a metric (dialogues per step)
MAX_DIALOGUES_PER_STEP = 4  # sample dialogues written as text each step


def report_to_error(report_to: Any) -> str:
    """Why `report_to` cannot be used ('' when it can): unknown names, 'none' mixed with trackers, or a
    tracker whose package is not installed (found without importing it)."""
    if not isinstance(report_to, list) or not report_to or not all(isinstance(x, str) for x in report_to):
        return f"must be a non-empty list of tracker names ({', '.join(REPORT_TO)}), got {report_to!r:.60}"
    unknown = [x for x in report_to if x not in REPORT_TO]
    if unknown:
        return f"unknown tracker(s) {', '.join(map(repr, unknown))}; one of {', '.join(REPORT_TO)}"
    if "none" in report_to and len(report_to) > 1:
        return "'none' turns tracking off and cannot be combined with trackers"
    missing = [x for x in report_to if x != "none" and importlib.util.find_spec(TRACKER_PACKAGES[x]) is None]
    if missing:
        return "; ".join(f"{x!r} needs the {TRACKER_PACKAGES[x]} package, which is not installed "
                         f"(pip install {TRACKER_PACKAGES[x]}, or remove it from report_to)" for x in missing)
    return ""


class Tracker(Protocol):
    name: str

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None: ...

    def log_dialogues(self, step: int, texts: list[str]) -> None: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------------------------------------ trackers
class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, log_dir: Path, start_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        # purge_step hides events a killed run wrote after its last checkpoint (they are trained again)
        if start_step:
            _after_the_newest_event_file(log_dir)
        self.writer = SummaryWriter(str(log_dir), purge_step=start_step + 1 if start_step else None)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)

    def log_dialogues(self, step: int, texts: list[str]) -> None:
        self.writer.add_text(TEXT_TAG, "\n\n---\n\n".join(texts), step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def _after_the_newest_event_file(log_dir: Path) -> None:
    """TensorBoard reads a folder's event files in name order, and a name is the second it was made in, then
    host, pid and a per-process counter compared as text (counter 10 sorts before 9). A resumed run's purge
    applies only to the files read before its own, so a resume within the same second as the newest file waits
    for the next second (at most one)."""
    seconds = [int(part[3]) for part in (p.name.split(".") for p in log_dir.glob("events.out.tfevents.*"))
               if len(part) > 3 and part[3].isdigit()]
    if seconds:
        time.sleep(max(0.0, max(seconds) + 1 - time.time()))


class WandbTracker:
    name = "wandb"

    def __init__(self, output_dir: Path, run_name: str, config: dict[str, Any]):
        import wandb

        self.wandb = wandb
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", DEFAULT_PROJECT), name=run_name,
                              config=config, dir=os.environ.get("WANDB_DIR") or str(output_dir),
                              mode=os.environ.get("WANDB_MODE", "offline"))

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def log_dialogues(self, step: int, texts: list[str]) -> None:
        self.run.log({TEXT_TAG: self.wandb.Table(columns=["dialogue"], data=[[t] for t in texts])}, step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowTracker:
    name = "mlflow"

    def __init__(self, output_dir: Path, run_name: str, config: dict[str, Any]):
        import mlflow

        self.mlflow = mlflow
        mlflow.set_tracking_uri(os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{output_dir / 'mlflow.db'}")
        mlflow.set_experiment(os.environ.get("MLFLOW_EXPERIMENT_NAME", DEFAULT_PROJECT))
        self.run = mlflow.start_run(run_name=run_name)
        mlflow.log_params({k: str(v)[:500] for k, v in config.items()})

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.mlflow.log_metrics(dict(metrics), step=step)

    def log_dialogues(self, step: int, texts: list[str]) -> None:
        self.mlflow.log_text("\n\n---\n\n".join(texts), f"{TEXT_TAG}/step-{step:06d}.md")

    def close(self) -> None:
        self.mlflow.end_run()


class TrackioTracker:
    name = "trackio"

    def __init__(self, run_name: str, config: dict[str, Any]):
        from storage import lab_home

        # trackio reads TRACKIO_DIR once, when it is first imported
        os.environ.setdefault("TRACKIO_DIR", str(lab_home() / "trackio"))
        import trackio

        self.trackio = trackio
        with contextlib.redirect_stdout(sys.stderr):  # its banner is not the job's output
            self.run = trackio.init(project=os.environ.get("TRACKIO_PROJECT", DEFAULT_PROJECT), name=run_name,
                                    config=config, resume="allow", embed=False, auto_log_cpu=False,
                                    auto_log_gpu=False)

    def log_metrics(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(dict(metrics), step=step)

    def log_dialogues(self, step: int, texts: list[str]) -> None:
        self.run.log({TEXT_TAG: self.trackio.Markdown("\n\n---\n\n".join(texts))}, step=step)

    def close(self) -> None:
        with contextlib.redirect_stdout(sys.stderr):
            self.trackio.finish()  # also forgets the current run, which trackio would otherwise finish at exit


# ------------------------------------------------------------------------------------------------ fan-out
class Tracking:
    """Sends each step to every tracker; a tracker that raises is reported once and dropped."""

    def __init__(self, trackers: Sequence[Tracker]):
        self.trackers = list(trackers)

    def log_step(self, step: int, metrics: dict[str, float], samples: Sequence[Any] = (),
                 rewards: Sequence[float] = ()) -> None:
        """`rewards` (one per sample, as the training step computed them) go into the dialogue texts."""
        scalars = {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        shown = list(samples)[:MAX_DIALOGUES_PER_STEP]
        texts = [dialogue_markdown(s, r) for s, r in zip(shown, list(rewards) + [None] * len(shown))]
        for tracker in list(self.trackers):
            self._call(tracker, tracker.log_metrics, step, scalars)
            if texts:
                self._call(tracker, tracker.log_dialogues, step, texts)

    def close(self) -> None:
        for tracker in list(self.trackers):
            self._call(tracker, tracker.close)
        self.trackers = []

    def _call(self, tracker: Tracker, method: Any, *args: Any) -> None:
        try:
            method(*args)
        except Exception as exc:  # tracking must never stop training
            print(f"tracking: {tracker.name} failed and is turned off: {type(exc).__name__}: {exc}",
                  file=sys.stderr, flush=True)
            if tracker in self.trackers:
                self.trackers.remove(tracker)


def make_tracking(report_to: list[str], output_dir: Path, run_name: str, config: dict[str, Any],
                  start_step: int = 0) -> Tracking:
    """The trackers `report_to` names (validated by TrainConfig), writing under `output_dir`."""
    output_dir = Path(output_dir)
    trackers: list[Tracker] = []
    for name in report_to:
        if name == "tensorboard":
            trackers.append(TensorBoardTracker(output_dir / "tensorboard", start_step))
        elif name == "wandb":
            trackers.append(WandbTracker(output_dir, run_name, config))
        elif name == "mlflow":
            trackers.append(MlflowTracker(output_dir, run_name, config))
        elif name == "trackio":
            trackers.append(TrackioTracker(run_name, config))
    return Tracking(trackers)


def dialogue_markdown(sample: Any, reward: Optional[float] = None) -> str:
    """A rollout sample as markdown: profile, final emotion, reward (when given), then each message (user
    messages with the emotion after them)."""
    final = "—" if sample.final_emotion is None else f"{sample.final_emotion:g}"
    head = (f"**{sample.profile_id}** · final emotion {final} · "
            + ("" if reward is None else f"reward {reward:.3f} · ") +
            f"{sample.outcome or sample.status}" + (f" · error: {sample.error}" if sample.error else ""))
    lines, n_user = [head], 0
    for m in sample.messages:
        if m.get("role") == "user":
            emotion = sample.emotions[n_user] if n_user < len(sample.emotions) else None
            n_user += 1
            lines.append("- user" + (f" ({emotion:g})" if emotion is not None else "") + f": {m.get('content', '')}")
        else:
            lines.append(f"- assistant: {m.get('content', '')}")
    return "\n".join(lines)
