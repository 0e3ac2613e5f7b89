"""Stopping a rollout when its job is cancelled: a thread watches the job's Cancel flag and stops the dialogues
in flight. The benchmark and the trainer both use it; the job (trainer.jobs.context.JobContext) only has to
have a `cancelled` attribute."""
from __future__ import annotations

import threading
from typing import Any, Callable

CANCEL_POLL_S = 0.2  # how often a running rollout looks at its job's Cancel flag


def watch_cancel(job: Any, stop: Callable[[], None], poll_s: float = CANCEL_POLL_S) -> Callable[[], None]:
    """Call `stop()` once, from a thread, as soon as `job.cancelled` turns true (Cancel, or this process
    lost the job): how the dialogues in flight end when their job is cancelled. Returns the function that
    ends the watch; call it when the work is done. job None: nothing to watch."""
    if job is None:
        return lambda: None
    done = threading.Event()

    def watch() -> None:
        while not done.wait(poll_s):
            if job.cancelled:
                stop()
                return

    thread = threading.Thread(target=watch, daemon=True, name=f"cancel-watch-{getattr(job, 'job_id', '')}")
    thread.start()

    def end() -> None:
        done.set()
        thread.join()

    return end
