"""Who owns a job: an OS-level lock on a file in the job's folder, held by the job process for its life.

`fcntl.flock` on `<job folder>/owner.lock` is exclusive and released by the kernel when the process
ends (exit, crash, kill -9), never by a stall: a process that is stopped (SIGSTOP, a paused VM, a long
swap) keeps it. So a second process can never take over a job whose owner is alive, however late its
heartbeats are; `trainer.jobs.control.reopen` refuses, or with stop_owner=True kills the owner first. The lock
file also holds the owner's pid, for messages and for stopping it.

Processes started by the owner with fork but no exec share the lock (Python opens the file
non-inheritable, so exec'd children, e.g. subprocess, do not).
"""
from __future__ import annotations

import fcntl
import os
import signal
import time
from pathlib import Path
from typing import Optional

LOCK_NAME = "owner.lock"


def pid_alive(pid: Optional[int]) -> bool:
    """True when process `pid` exists on this host and is not a zombie."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


class JobLock:
    """The exclusive owner lock of one job folder. `acquire()` -> True when this process now owns it."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / LOCK_NAME
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, write_pid: bool = True) -> bool:
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        if write_pid:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def owner_pid(folder: str | Path) -> Optional[int]:
    """The pid of the live process holding the folder's lock, or None when nobody holds it."""
    probe = JobLock(folder)
    if not probe.path.exists():
        return None
    if probe.acquire(write_pid=False):
        probe.release()
        return None
    try:
        return int(probe.path.read_text().strip() or 0) or None
    except (OSError, ValueError):
        return None


def stop_owner(folder: str | Path, timeout_s: float = 30.0) -> Optional[int]:
    """Kill (SIGKILL: a stopped process cannot handle anything gentler) the process group of the
    folder's owner and wait until the lock is free. Returns the pid stopped, or None when there was no
    owner. Raises TimeoutError when the lock is still held after timeout_s."""
    pid = owner_pid(folder)
    if pid is None:
        return None
    try:
        pgid = os.getpgid(pid)
        if pgid == pid and pgid != os.getpgrp():
            os.killpg(pgid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout_s
    while owner_pid(folder) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the owner of {folder} (pid {pid}) still holds its lock after {timeout_s:g} s")
        time.sleep(0.05)
    return pid
