"""Warm starts for the lab's background processes (jobs, experiment runners).

A cold `python -m trainer job N` spends ~10 s of CPU importing torch, transformers, sentence-transformers and
SQLAlchemy before its first step. The starter is one process per launcher that imports those libraries once
and then forks a new process per request; the fork runs `python -m trainer ARGS`'s own `main(ARGS)` at once.
A forked process is what a cold one is to the rest of the lab: a new session (it outlives the app), its output
appended to the job's log, its own pid for heartbeats, owner locks, cancel and kill.

What makes the fork safe, and where the starter says no (the launcher then starts processes cold):
- torch is a CPU build (a CUDA runtime must not be initialised before a fork; the GPU machines start cold);
- the starter runs one Python thread when it forks (checked before each fork; the BLAS libraries' own
  native pools handle a fork themselves, as they do for multiprocessing and DataLoader workers);
- it imports third-party libraries only, with the launcher's environment: a request whose environment differs
  from the starter's in anything but the lab's own settings (PER_PROCESS_PREFIXES) gets a new starter;
- the fork resets what a new process would not share: SIGCHLD handling, numpy's global generator, the
  environment, the working folder, stdin / stdout / stderr.
RLVER_LAB_WARM_STARTS=0 turns warm starts off.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

WARM_ENV = "RLVER_LAB_WARM_STARTS"
# environment a fork may differ in from its starter: the lab's own settings (RLVER_LAB_DB, _HOME, _ACCESS...,
# read by the project's modules, which the starter never imports) and pytest's per-test markers. Any other
# difference means another starter.
PER_PROCESS_PREFIXES = ("RLVER_LAB_", "PYTEST_")
PRELOAD = ("numpy", "torch", "transformers", "sentence_transformers", "sqlalchemy", "alembic", "yaml")


def _preload() -> str:
    """Import the heavy libraries; return why forking from here would be unsafe, or ''."""
    for name in PRELOAD:
        __import__(name)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: F401  (the lazy modules behind them)

    if torch.version.cuda is not None or torch.version.hip is not None:
        return f"torch {torch.__version__} is a GPU build: processes start cold"
    return ""


def _become(request: dict[str, Any], channels: tuple[Any, ...]) -> int:
    """In the forked child: turn into `python -m trainer ARGS` as start_command would start it and run it.
    Returns its exit code; the caller returns it from serve(), so the process ends as a cold one does (threads
    joined, atexit handlers run, output flushed)."""
    for channel in channels:  # the starter's pipes stay the starter's
        channel.close()
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [str(Path(request["cwd"]) / "trainer" / "__main__.py"), *request["args"]]
    import numpy as np

    np.random.seed()  # a fork copies the generator's state; a new process seeds it from the OS
    from trainer.__main__ import main

    try:
        return main(list(request["args"]))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1


def serve() -> int:
    """The starter's loop: one JSON request per line on stdin ({"args", "env", "cwd", "log"}), one JSON reply per
    line on stdout ({"pid"} or {"error"}). The first line out says whether it can fork. Ends at stdin's end."""
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # a library printing on stdout must not write into the replies
    os.close(null)

    def say(obj: dict[str, Any]) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    try:
        refusal = _preload()
    except Exception as exc:  # a library that cannot be imported here fails the cold start the same way
        refusal = f"preload failed: {type(exc).__name__}: {exc}"
    say({"ready": not refusal, "why": refusal})
    if refusal:
        return 0
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the forks: no zombies, no waiting thread
    for line in requests:
        request = json.loads(line)
        if threading.active_count() != 1:  # a Python thread may hold a lock the fork would copy held
            say({"error": f"the starter runs {threading.active_count()} Python threads; a fork is not safe"})
            continue
        pid = os.fork()
        if pid == 0:  # the fork leaves the loop here and ends as `python -m trainer ARGS` would
            return _become(request, (requests, replies))
        say({"pid": pid})
    return 0


class WarmProcess:
    """What start_command returns for a forked process: its pid (the starter's child, reaped by the kernel)."""

    def __init__(self, pid: int):
        self.pid = pid


class Starter:
    """The launcher's side: starts the starter process on first use and asks it for forks."""

    def __init__(self, env: dict[str, str]):
        self.env = dict(env)
        self.lock = threading.RLock()
        self.proc: Optional[subprocess.Popen] = None
        self.ready = False
        self.why = ""

    def _start(self) -> None:
        from storage.db import PROJECT_ROOT

        self.proc = subprocess.Popen([sys.executable, "-m", "trainer.jobs.starter"], cwd=PROJECT_ROOT, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, bufsize=1)
        hello = self.proc.stdout.readline()
        try:
            answer = json.loads(hello)
        except ValueError:
            answer = {"ready": False, "why": f"the starter did not answer ({hello!r})"}
        self.ready, self.why = bool(answer.get("ready")), answer.get("why", "")
        if not self.ready:
            self.close()

    def start(self, args: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> Optional[int]:
        """The pid of a new process running `python -m trainer ARGS`, or None when this starter cannot fork."""
        with self.lock:
            if self.proc is not None and self.proc.poll() is not None:  # it was killed: start another
                self.close()
            if self.proc is None and not self.why:
                self._start()
            if not self.ready or self.proc is None:
                return None
            try:
                self.proc.stdin.write(json.dumps({"args": list(args), "env": env, "cwd": str(cwd),
                                                  "log": str(log_path)}) + "\n")
                self.proc.stdin.flush()
                answer = json.loads(self.proc.stdout.readline() or "{}")
            except (OSError, ValueError):
                answer = {}
            if "pid" not in answer:
                self.why = answer.get("error", "the starter stopped answering")
                self.close()
                return None
            return int(answer["pid"])

    def close(self) -> None:
        with self.lock:
            proc, self.proc, self.ready = self.proc, None, False
        if proc is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass
            proc.wait()


_STARTER: Optional[Starter] = None  # the launcher's one starter, for the environment it runs in
_STARTER_LOCK = threading.Lock()


def warm_start(args: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> Optional[int]:
    """Start `python -m trainer ARGS` forked from a warm starter; None when warm starts are off or refused
    (the caller then starts it cold). `env` is the new process's whole environment (start_command's: the
    launcher's, PYTHONPATH and PYTHONUNBUFFERED set); the starter runs in it less PER_PROCESS_PREFIXES."""
    if os.environ.get(WARM_ENV, "1") == "0":
        return None
    global _STARTER
    base = {k: v for k, v in env.items() if not k.startswith(PER_PROCESS_PREFIXES)}
    with _STARTER_LOCK:
        if _STARTER is None or _STARTER.env != base:  # the environment changed: the old one is not used again
            if _STARTER is not None:
                _STARTER.close()
            _STARTER = Starter(base)
        starter = _STARTER
    return starter.start(args, env, cwd, log_path)


if __name__ == "__main__":
    sys.exit(serve())
