"""Who runs an experiment, and whether it lives: in the store, as for a job of the ray backend.

The runner (trainer.experiments.runner) takes the experiment with one conditional write under the store's write
lock (docs/store.md): the row then names its pid and host (`runner_pid`, `runner_host`), and a thread beats
`runner_heartbeat_at` every HEARTBEAT_S. Any instance of the lab, on any machine, reads the runner as

    alive  the heartbeat is fresh (within STALE_AFTER_S) and, when the runner is of this host, its pid lives
    dead   anything else: resumable from anywhere

A second runner is refused while the first is alive. A runner that loses the experiment (it stalled past the
limit and another took it, or the row was cleared) sees it at its next beat and stops without writing.
"""
from __future__ import annotations

import threading
from datetime import datetime
from typing import Optional

from sqlalchemy import update

from storage import Experiment, Store, session_scope
from storage.models import utcnow
from trainer.jobs.backend import host_name
from trainer.jobs.liveness import STALE_AFTER_S, runner_lives

HEARTBEAT_S = 2.0


def describe_runner(pid: Optional[int], host: str) -> str:
    return f"process {pid} on {host or 'an unknown host'}"


def claim_runner(exp: Experiment, pid: int, stale_after_s: float = STALE_AFTER_S) -> str:
    """Take `exp` (a row read in a write transaction) for runner `pid` of this host; '' when taken, else who
    holds it (a live runner)."""
    if runner_lives(exp.runner_pid, exp.runner_host, exp.runner_heartbeat_at, stale_after_s):
        return describe_runner(exp.runner_pid, exp.runner_host)
    exp.runner_pid, exp.runner_host, exp.runner_heartbeat_at = pid, host_name(), utcnow()
    return ""


def _mine(experiment_id: int, pid: int):
    return update(Experiment).where(Experiment.id == experiment_id, Experiment.runner_pid == pid,
                                    Experiment.runner_host == host_name())


def release_runner(store: Store, experiment_id: int, pid: int) -> None:
    """Clear the row's runner if it still names this one."""
    with session_scope(store) as s:
        s.execute(_mine(experiment_id, pid).values(runner_pid=None, runner_host="", runner_heartbeat_at=None))


class RunnerHeartbeat:
    """The runner's heartbeat thread. `lost` turns true once a beat finds the row names another runner."""

    def __init__(self, store: Store, experiment_id: int, pid: int, every_s: float = HEARTBEAT_S):
        self.store, self.experiment_id, self.pid, self.every_s = store, experiment_id, pid, every_s
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"experiment-heartbeat-{experiment_id}")

    def start(self) -> "RunnerHeartbeat":
        self._thread.start()
        return self

    def beat(self) -> bool:
        """One beat; False (and `lost`) when the row no longer names this runner."""
        with session_scope(self.store) as s:
            taken = s.execute(_mine(self.experiment_id, self.pid).values(runner_heartbeat_at=utcnow())).rowcount
        self.lost = self.lost or not taken
        return not self.lost

    def _run(self) -> None:
        while not self._stop.wait(self.every_s) and not self.lost:
            try:
                self.beat()
            except Exception as exc:  # the store away for a while: the next beat tries again
                print(f"experiment heartbeat failed: {exc}", flush=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
