"""Command-line runs are jobs too: a benchmark, comparison or judge run started from a terminal records a job
and runs it in that same process as its owner (trainer.jobs.context.JobContext: the owner lock, the
heartbeat, the final status), so "dead" and "stalled" are derived for it as for a job the app launched, the
views show it, and a resume (`--resume`, the views' Resume) is refused while its process lives.

    job_id = jobs.create_job(store, kind, config)        # the caller's record
    result = run_foreground(store, job_id, work)          # work(ctx) in this process, as the job's owner
    result = resume_foreground(store, job_id, work)       # the same job again (refused while its owner lives)

Ctrl-C (SIGINT) and SIGTERM ask the work to stop (ctx.cancelled; the unit in progress ends first) and the job
ends cancelled; a second Ctrl-C quits at once. The context's own messages ("job 3 running (pid ...)") go
to stderr with clean_stdout, so a `--json` command keeps stdout for its JSON; all of it also goes to the
job's log, as for a launched job.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, TypeVar

from storage import Job, Store, read_scope
from trainer.jobs.context import JobContext
from trainer.jobs.control import reopen
from trainer.jobs.queue import JobError, get_job, set_log_path

T = TypeVar("T")


def run_foreground(store: Store, job_id: int, work: Callable[[JobContext], T],
                   clean_stdout: bool = False) -> Optional[T]:
    """Run `work(ctx)` in this process as the owner of queued job `job_id`, its output also in the job's log;
    its result (None when the job was cancelled before the work began). JobError when another live process
    owns the job. clean_stdout: everything printed goes to stderr (a `--json` command's stdout is its JSON)."""
    ctx = JobContext(store, job_id)
    restore = _cancel_on_interrupt(ctx)
    result: Optional[T] = None
    try:
        with contextlib.redirect_stdout(sys.stderr) if clean_stdout else contextlib.nullcontext():
            with job_log(store, ctx), ctx:
                result = work(ctx)
    finally:
        restore()
    return result


def resume_foreground(store: Store, job_id: int, work: Callable[[JobContext], T], stop_owner: bool = False,
                      clean_stdout: bool = False) -> Optional[T]:
    """Reopen job `job_id` (interrupted, failed, cancelled or dead: trainer.jobs.control.reopen, which refuses
    while its owner lives, naming the pid, unless stop_owner) and run it here as run_foreground does. A job
    recorded but never started (queued, no process) runs as it is."""
    with read_scope(store) as s:
        job = s.get(Job, job_id)
        never_started = job is not None and job.status == "queued" and job.pid is None
    if not never_started:
        reopen(store, job_id, stop_owner=stop_owner)
    return run_foreground(store, job_id, work, clean_stdout)


def job_to_resume(store: Store, job_id: int, kind: str) -> dict[str, Any]:
    """Job `job_id` as get_job gives it, checked for a command's `--resume`: JobError when it does not exist,
    is of another kind than `kind`, or already succeeded (whether its owner lives is reopen's to say)."""
    job = get_job(store, job_id)
    if job is None:
        raise JobError(f"--resume: job {job_id} does not exist")
    if job["kind"] != kind:
        raise JobError(f"--resume: job {job_id} is a {job['kind']} job, not a {kind} run")
    if job["status"] == "succeeded":
        raise JobError(f"--resume: {kind} job {job_id} already finished")
    return job


def _cancel_on_interrupt(ctx: JobContext) -> Callable[[], None]:
    """SIGINT -> ctx.request_cancel (a second one raises KeyboardInterrupt); returns the undo function."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum: int, frame: Any) -> None:
        if ctx.cancelled:
            raise KeyboardInterrupt
        print("stopping: the work in progress ends first (Ctrl-C again to quit at once)", file=sys.stderr,
              flush=True)
        ctx.request_cancel()

    signal.signal(signal.SIGINT, handler)
    return lambda: signal.signal(signal.SIGINT, previous)


class _Tee:
    """Write to the terminal and to the job's log file."""

    def __init__(self, stream: Any, log: Any):
        self.stream, self.log = stream, log

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.log.write(text)
        self.log.flush()
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
        self.log.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _already_logging_to(path: Path) -> bool:
    """True when stdout is the log file itself (a process started by jobs.launch): no second copy."""
    try:
        out, log = os.fstat(sys.stdout.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # no real file behind stdout (pytest capture), no log yet
        return False
    return (out.st_dev, out.st_ino) == (log.st_dev, log.st_ino)


@contextmanager
def job_log(store: Store, ctx: Any) -> Iterator[None]:
    """While the job runs, stdout and stderr also go to `job.log` in its folder (recorded on the job)."""
    path = Path(ctx.output_dir) / "job.log"
    set_log_path(store, ctx.job_id, str(path))
    if _already_logging_to(path):
        yield
        return
    saved = sys.stdout, sys.stderr
    with open(path, "a", encoding="utf-8") as log:
        sys.stdout, sys.stderr = _Tee(sys.stdout, log), _Tee(sys.stderr, log)
        try:
            yield
        finally:
            sys.stdout, sys.stderr = saved
