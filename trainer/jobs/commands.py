"""Processes running `python -m trainer ARGS`: `start_command` starts one in the background (a job, an
experiment runner), `run_command` runs one to its end and returns its output (the Training view's plans).
Both fork from the warm starter where they can (trainer.jobs.starter), else start a cold interpreter. `log_tail`
reads the end of such a process's log."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from storage.db import PROJECT_ROOT
from trainer.jobs.owner import pid_alive
from trainer.jobs.starter import WarmProcess, warm_start

WAIT_POLL_S = 0.1  # how often run_command looks whether its process has ended (a warm one is the starter's to reap)


def start_command(store_url: Optional[str], args: list[str], log_path: Path,
                  name: str) -> subprocess.Popen | WarmProcess:
    """Start `python -m trainer ARGS` in a new session (outliving its launcher), output appended to log_path;
    the store URL goes in RLVER_LAB_DB (None: the launcher's, if any), never on the command line. Forked from
    the warm starter where it can, else a cold interpreter, reaped when it ends so it never lingers as a zombie
    of the launching process. Either way the result has the new process's `pid`."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if store_url is not None:
        env["RLVER_LAB_DB"] = store_url
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    with open(log_path, "ab") as log:  # a log that cannot be written fails here, in the launcher, either way
        pid = warm_start(args, env, PROJECT_ROOT, log_path)
        if pid is not None:
            return WarmProcess(pid)
        proc = subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=PROJECT_ROOT, env=env,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    threading.Thread(target=proc.wait, daemon=True, name=name).start()
    return proc


def run_command(args: list[str], output_path: Path, timeout_s: float,
                stop: Optional[threading.Event] = None) -> bool:
    """Run `python -m trainer ARGS` to its end, its stdout and stderr written to output_path. False when it ran
    past timeout_s or `stop` was set (its process group is then killed). A warm process's exit code is the
    starter's to collect, so callers judge the result by the output (a command's JSON line, its last error line)."""
    proc = start_command(None, args, output_path, f"run-{args[0] if args else 'trainer'}")
    deadline = time.monotonic() + timeout_s
    while pid_alive(proc.pid):  # a cold one is reaped by start_command's thread; a zombie counts as ended
        if time.monotonic() > deadline or (stop is not None and stop.is_set()):
            signal_group(proc.pid, signal.SIGKILL)
            return False
        time.sleep(WAIT_POLL_S)
    return True


def signal_group(pid: int, sig: int) -> None:
    """Signal the process group of a command started here (its own session: the process and its children); only
    the process while it has no session of its own yet (a fork just made); never our own group."""
    try:
        pgid = os.getpgid(pid)
        if pgid == pid and pgid != os.getpgrp():
            os.killpg(pgid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def log_tail(path: str, max_lines: int = 200, max_bytes: int = 65536) -> str:
    """The last lines of a log file ('' when there is none yet)."""
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - max_bytes))
        lines = f.read().decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-max_lines:])
