"""A real Ray cluster of several nodes on this one machine, for tests: a head (`ray start --head`, serving the Jobs
API on its dashboard) and more raylets joined with `ray start --address`, CPU only.

Each node carries a custom resource of its own (`{name: 1}`, e.g. "lab_node_head", "lab_node_b"), so a test can
tell the nodes apart: `node_id(name)` is Ray's node id of the node holding it, `raylet_pid(name)` the pid of its
raylet (kill -9 of it is a node dying). Every port of every node is a free one (another Ray on the machine keeps
its defaults), the footprint is small (a few logical CPUs, the smallest object store, the dashboard only on the
head, no prestarted workers: the suite runs on 2 shared cores) and GCS notices a dead node within seconds.
`stop()` ends every node's process group (SIGTERM, then SIGKILL) and removes the temporary folder.

    cluster = RayCluster(env=...)            # env: what every node's processes get (PYTHONPATH, PGPASSWORD, ...)
    address = cluster.start_head()           # the Jobs API, http://127.0.0.1:PORT
    cluster.add_node("lab_node_b")           # a second raylet, waited for until Ray lists it alive
    ...
    cluster.kill_raylet("lab_node_b"); cluster.wait_node_dead("lab_node_b"); cluster.add_node("lab_node_b")
    cluster.stop()
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

HEAD = "lab_node_head"  # the head's own custom resource
OBJECT_STORE_BYTES = 80 * 2 ** 20  # Ray's smallest object store is 75 MiB
START_TIMEOUT_S = 240.0
START_TRIES = 3  # a Ray node on 2 loaded cores takes tens of seconds to come up
# every port a node opens, each a free one of its own
NODE_PORT_FLAGS = ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port", "--runtime-env-agent-port",
                   "--metrics-export-port", "--node-manager-port", "--object-manager-port")
HEAD_PORT_FLAGS = ("--port", "--dashboard-port", "--ray-client-server-port", *NODE_PORT_FLAGS)
# GCS health checks: a killed raylet is declared dead after about period x threshold (Ray's default: 3 s x 5)
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "5",
                      "RAY_health_check_initial_delay_ms": "1000"}
QUIET = {"RAY_DISABLE_USAGE_STATS": "1", "RAY_enable_worker_prestart": "0",
         "RAY_prestart_worker_first_driver": "0", "RAY_worker_register_timeout_seconds": "120"}


class RayClusterError(RuntimeError):
    """A node did not come up (its log's tail in the message) or did not go away."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_executable() -> Path:
    return Path(sys.executable).parent / "ray"


@dataclass
class RayNode:
    """One `ray start --block` process (its own process group) and what it was started with."""

    name: str
    process: subprocess.Popen
    log_path: Path
    num_cpus: int
    node_id: str = ""
    log: Any = field(default=None, repr=False)

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


class RayCluster:
    """Nodes of one Ray cluster on this machine; see the module docstring."""

    def __init__(self, env: Optional[dict[str, str]] = None, cwd: Optional[Path] = None) -> None:
        self.env = dict(os.environ, **QUIET, **FAST_HEALTH_CHECKS, **(env or {}))
        self.cwd = cwd
        self.temp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: socket paths fit 107 characters
        self.nodes: dict[str, RayNode] = {}
        self.gcs_address = ""  # 127.0.0.1:PORT, what `ray start --address` joins
        self.address = ""  # the Jobs API, http://127.0.0.1:PORT

    # ------------------------------------------------------------------------------------------ start
    def _start(self, name: str, num_cpus: int, flags: list[str]) -> RayNode:
        if name in self.nodes and self.nodes[name].process.poll() is None:
            raise RayClusterError(f"node {name} is already running")
        log_path = self.temp / f"{name}.log"
        log = open(log_path, "ab")
        args = [str(ray_executable()), "start", "--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1",
                "--num-cpus", str(num_cpus), "--num-gpus", "0", "--resources", json.dumps({name: 1}),
                "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", str(self.temp), *flags]
        process = subprocess.Popen(args, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        node = RayNode(name, process, log_path, num_cpus, log=log)
        self.nodes[name] = node
        return node

    def start_head(self, num_cpus: int = 2, name: str = HEAD) -> str:
        """Start the head; returns the Jobs API address once it answers and lists the head alive."""
        def flags() -> list[str]:
            ports = {flag: free_port() for flag in HEAD_PORT_FLAGS}
            self.gcs_address = f"127.0.0.1:{ports['--port']}"
            self.address = f"http://127.0.0.1:{ports['--dashboard-port']}"
            return ["--head", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                    *(a for flag, port in ports.items() for a in (flag, str(port)))]

        self._start_alive(name, num_cpus, flags)
        return self.address

    def add_node(self, name: str, num_cpus: int = 2) -> str:
        """Start a raylet joining the head, with custom resource `name`; returns its Ray node id once alive."""
        if not self.gcs_address:
            raise RayClusterError("start the head first")
        return self._start_alive(name, num_cpus, lambda: [
            "--address", self.gcs_address, *(a for flag in NODE_PORT_FLAGS for a in (flag, str(free_port())))]).node_id

    def _start_alive(self, name: str, num_cpus: int, flags: Callable[[], list[str]]) -> RayNode:
        """Start a node and wait until Ray lists it alive. `ray start` gives a raylet 30 s to register (fixed in
        Ray); on a loaded machine it can miss that and exit: it is started again (fresh ports), START_TRIES times."""
        for attempt in range(1, START_TRIES + 1):
            node = self._start(name, num_cpus, flags())
            try:
                self._wait_alive(node)
                return node
            except RayClusterError as exc:
                _end(node)
                if attempt == START_TRIES or "exited" not in str(exc) or "timed out during startup" not in str(exc):
                    raise
        raise AssertionError("unreachable")

    def _wait_alive(self, node: RayNode) -> None:
        def alive() -> bool:
            if node.process.poll() is not None:
                raise RayClusterError(f"ray node {node.name} exited ({node.process.returncode}):\n{node.log_tail()}")
            node.node_id = self.node_id(node.name, alive_only=True)
            return bool(node.node_id)

        if not _poll(alive, START_TIMEOUT_S, 1.0):
            raise RayClusterError(f"ray node {node.name} not alive after {START_TIMEOUT_S:g} s:\n{node.log_tail()}")

    # ------------------------------------------------------------------------------------------ look
    def list_nodes(self) -> list[dict[str, Any]]:
        """Ray's nodes as the head's state API lists them ([] while it does not answer)."""
        try:
            from ray.util.state import list_nodes

            return [n if isinstance(n, dict) else n.__dict__ for n in
                    list_nodes(address=self.address, detail=True, raise_on_missing_output=False, timeout=30)]
        except Exception:
            return []

    def node_id(self, name: str, alive_only: bool = True) -> str:
        """The Ray node id of the node holding custom resource `name` ('' when none is listed)."""
        for n in self.list_nodes():
            if name in (n.get("resources_total") or {}) and (n.get("state") == "ALIVE" or not alive_only):
                return str(n["node_id"])
        return ""

    def name_of(self, node_id: str) -> str:
        """Which of our nodes a Ray node id is ('' when none)."""
        for n in self.list_nodes():
            if n.get("node_id") == node_id:
                return next((r for r in (n.get("resources_total") or {}) if r in self.nodes), "")
        return ""

    def raylet_pid(self, name: str) -> int:
        """The pid of node `name`'s raylet process (a child of its `ray start`)."""
        import psutil

        node = self.nodes[name]
        for child in psutil.Process(node.process.pid).children(recursive=True):
            try:
                if child.name() == "raylet" or "raylet/raylet" in " ".join(child.cmdline()[:1]):
                    return child.pid
            except psutil.Error:
                continue
        raise RayClusterError(f"node {name}: no raylet process found")

    # ------------------------------------------------------------------------------------------ end
    def kill_raylet(self, name: str) -> None:
        """kill -9 of node `name`'s raylet: the node dies as a crashed machine's would (`ray start --block`
        then ends the rest of that node's processes)."""
        os.kill(self.raylet_pid(name), signal.SIGKILL)

    def wait_node_dead(self, name: str, timeout: float = 120.0) -> None:
        """Until the head lists node `name` dead (GCS's health checks) and its `ray start` has ended."""
        node = self.nodes[name]
        dead_id = node.node_id

        def dead() -> bool:
            states = [n.get("state") for n in self.list_nodes() if n.get("node_id") == dead_id]
            return states == ["DEAD"]

        if not _poll(dead, timeout, 1.0):
            raise RayClusterError(f"node {name} ({dead_id}) not listed dead after {timeout:g} s")
        _end(node)

    def stop_node(self, name: str) -> None:
        _end(self.nodes.pop(name))

    def stop(self) -> None:
        """End every node (workers first, the head last) and remove the temporary folder."""
        for name in sorted(self.nodes, key=lambda n: n == HEAD):
            _end(self.nodes[name])
        self.nodes.clear()
        shutil.rmtree(self.temp, ignore_errors=True)


@contextmanager
def running_cluster(node_names: tuple[str, ...] = (), env: Optional[dict[str, str]] = None,
                    cwd: Optional[Path] = None) -> Iterator[RayCluster]:
    """The head and one raylet per name, all ended on leaving."""
    cluster = RayCluster(env=env, cwd=cwd)
    try:
        cluster.start_head()
        for name in node_names:
            cluster.add_node(name)
        yield cluster
    finally:
        cluster.stop()


def _end(node: RayNode) -> None:
    """SIGTERM to the node's process group (`ray start --block` and what it started), SIGKILL after a short wait
    (a SIGTERM may leave a raylet hanging); then every process left in that group is killed too."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
        try:
            os.killpg(node.process.pid, sig)
        except ProcessLookupError:
            break
        try:
            node.process.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(node.process.pid, signal.SIGKILL)  # workers of the group that outlived `ray start`
    except ProcessLookupError:
        pass
    if node.log is not None:
        node.log.close()
        node.log = None


def _poll(cond: Callable[[], bool], timeout: float, every: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return cond()
