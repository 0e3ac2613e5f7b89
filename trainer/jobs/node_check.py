"""Does this node hold the code and environment the job was submitted with? (the ray backend, docs/cluster.md)

A Ray job runs `python -m trainer job ID` from the lab's checkout on whichever node Ray picks. The launcher
passes what it runs in the job's environment: the code version (storage.db.code_version: the git commit, with
"+dirty") and the environment's fingerprint (Python and the versions of the packages a job's results depend on).
The job process compares them with its node's before it takes the job; a node that differs refuses it in one
line naming the node and what differs, and the job ends failed with that line (no figures from other code).
"""
from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Optional

from trainer.jobs.backend import host_name

CODE_ENV, PYTHON_ENV = "RLVER_LAB_SUBMITTED_CODE", "RLVER_LAB_SUBMITTED_ENV"
PACKAGES = ("torch", "transformers", "deepspeed", "sqlalchemy", "ray")


def environment_fingerprint() -> str:
    """Python's version and the installed versions of PACKAGES, e.g. "python 3.11.7; torch 2.5.1; ..."."""
    parts = [f"python {platform.python_version()}"]
    for name in PACKAGES:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} -")
    return "; ".join(parts)


def submitted_env() -> dict[str, str]:
    """What the launcher passes to a Ray job: its code version and environment fingerprint."""
    from storage.db import code_version

    return {CODE_ENV: code_version(), PYTHON_ENV: environment_fingerprint()}


def node_problem(node: Optional[str] = None) -> str:
    """'' when this node runs what the job was submitted with (or nothing was passed: a local job), else one line
    naming the node and the difference."""
    from storage.db import code_version

    wanted_code, wanted_env = os.environ.get(CODE_ENV), os.environ.get(PYTHON_ENV)
    where = f"node {host_name()}" + (f" (Ray node {node})" if node else "")
    if wanted_code and wanted_code != code_version():
        return (f"{where} holds code {code_version()}, the job was submitted with {wanted_code}: bring its checkout "
                "to the same commit (docs/cluster.md)")
    if wanted_env and wanted_env != environment_fingerprint():
        mine = dict(p.split(" ", 1) for p in environment_fingerprint().split("; "))
        theirs = dict(p.split(" ", 1) for p in wanted_env.split("; "))
        differs = ", ".join(f"{k} {mine.get(k, '-')} (submitted with {v})" for k, v in theirs.items()
                            if mine.get(k) != v)
        return f"{where} runs another environment: {differs}; install the same versions there (make setup)"
    return ""
