"""A training job across nodes on the ray backend (`nodes: K`, `gpus: N` per node): the Ray job's driver.

    python -m trainer.learning.ray_ranks JOB_ID --nodes K --gpus N [--cpus C]

Ray places the ranks: one placement group of K bundles `{CPU: C, GPU: N}` with the STRICT_SPREAD strategy (each
bundle on a different node), one `NodeRanks` actor in each bundle, and each actor starts its node's ranks, the
lab's own job command `python -m trainer job JOB_ID` (N of them, one per GPU; one over gloo with `gpus: 0`),
with the variables torchrun gives a rank: RANK, LOCAL_RANK, WORLD_SIZE = K x max(N, 1), LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR (the first bundle's node) and MASTER_PORT (a free port there). The rank process is then
what it is under torchrun: the lab's DeepSpeed path joins the process group, rank 0 claims the job row (and
records every rank's Ray node id, RANKS_ENV), heartbeats, writes the checkpoints into the shared folder and the
job's status; the other ranks follow it (trainer.job_runner).

The driver ends with the ranks: with status 0 when every rank ended well, else with the first failure. A rank
that fails, or a node whose actor dies (its raylet killed, the machine lost), ends the whole job: the driver kills
every actor, and each actor's ranks die with it (PR_SET_PDEATHSIG), so no rank waits forever on a peer that is
gone; the job then shows dead (or failed, when rank 0 wrote why) and resumes from its last checkpoint. Cancel
(Ray's stop_job: SIGTERM to this driver) is passed to rank 0 alone, which stops every rank at the next step
and marks the job cancelled, as a local job does.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Optional

RANKS_ENV = "RLVER_LAB_RAY_RANKS"  # JSON: every rank's {rank, node_rank, node_id, node_ip}, for rank 0 to record
POLL_S = 0.5
WAIT_NOTE_S = 60.0  # while the placement group waits for nodes, say so this often


def rank_env(node_rank: int, local_rank: int, per_node: int, nodes: int, master: tuple[str, int]) -> dict[str, str]:
    """The variables torchrun gives rank `local_rank` of node `node_rank`."""
    return {"RANK": str(node_rank * per_node + local_rank), "LOCAL_RANK": str(local_rank),
            "WORLD_SIZE": str(nodes * per_node), "LOCAL_WORLD_SIZE": str(per_node), "GROUP_RANK": str(node_rank),
            "NODE_RANK": str(node_rank), "MASTER_ADDR": master[0], "MASTER_PORT": str(master[1])}


def _die_with_parent() -> None:
    """In a rank's process, before exec: SIGKILL when the actor that started it dies (Linux prctl)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class NodeRanks:
    """One node's ranks (a Ray actor in one bundle of the job's placement group)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def where(self) -> tuple[str, str]:
        """(Ray node id, node IP) of this actor."""
        import ray

        return ray.get_runtime_context().get_node_id(), ray.util.get_node_ip_address()

    def free_port(self) -> int:
        with socket.socket() as s:
            s.bind(("", 0))
            return s.getsockname()[1]

    def run(self, argv: list[str], cwd: str, envs: list[dict[str, str]]) -> list[int]:
        """Start one rank per env and wait for them; a rank that fails ends this node's others (SIGTERM, then
        SIGKILL). Returns the exit statuses."""
        self.procs = [subprocess.Popen(argv, cwd=cwd, env={**os.environ, **env}, preexec_fn=_die_with_parent)
                      for env in envs]
        ending_since: Optional[float] = None
        while any(p.poll() is None for p in self.procs):
            failed = any(p.poll() not in (None, 0) for p in self.procs)
            if failed and ending_since is None:
                ending_since = time.monotonic()
                self.signal(signal.SIGTERM)
            elif ending_since is not None and time.monotonic() - ending_since > 15:
                self.signal(signal.SIGKILL)
            time.sleep(POLL_S)
        return [int(p.returncode) for p in self.procs]

    def signal(self, sig: int, local_rank: Optional[int] = None) -> None:
        """Send `sig` to this node's ranks still running (or to `local_rank` alone)."""
        for i, p in enumerate(self.procs):
            if p.poll() is None and local_rank in (None, i):
                p.send_signal(sig)


def placement(nodes: int, gpus: int, cpus: float) -> tuple[list[dict[str, float]], str]:
    """The placement group's bundles and strategy: one bundle per node, every bundle on a different node."""
    bundle = {"CPU": float(cpus), **({"GPU": float(gpus)} if gpus else {})}
    return [dict(bundle) for _ in range(nodes)], "STRICT_SPREAD"


def run_ranks(job_id: int, nodes: int, gpus: int, cpus: float) -> int:
    """Place the job's ranks, run them and wait for them (see the module docstring); the exit status."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init(log_to_driver=True)  # the Ray job's own cluster (RAY_ADDRESS); the ranks' output comes back here
    bundles, strategy = placement(nodes, gpus, cpus)
    group = placement_group(bundles, strategy=strategy, name=f"rlver-lab-job-{job_id}-{os.getpid()}")
    print(f"job {job_id}: asking Ray for {nodes} nodes with {bundles[0]} each ({strategy})", flush=True)
    while not _ready(ray, group):
        print(f"job {job_id}: still waiting for {nodes} nodes with {bundles[0]} each", flush=True)
    per_node = max(gpus, 1)
    actor = ray.remote(NodeRanks)
    agents = [actor.options(num_cpus=cpus, num_gpus=gpus, max_concurrency=2, scheduling_strategy=(
        PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i))).remote() for i in range(nodes)]
    where = ray.get([a.where.remote() for a in agents])
    master = (where[0][1], ray.get(agents[0].free_port.remote()))
    ranks = [{"rank": i * per_node + local, "node_rank": i, "node_id": node_id, "node_ip": ip}
             for i, (node_id, ip) in enumerate(where) for local in range(per_node)]
    for r in ranks:
        print(f"job {job_id}: rank {r['rank']} on node {r['node_id']} ({r['node_ip']})", flush=True)
    argv = [sys.executable, "-m", "trainer", "job", str(job_id)]
    cwd = os.getcwd()
    runs = [agent.run.remote(argv, cwd, [dict(rank_env(i, local, per_node, nodes, master),
                                              **{RANKS_ENV: json.dumps(ranks)}) for local in range(per_node)])
            for i, agent in enumerate(agents)]
    signal.signal(signal.SIGTERM, lambda *_: agents[0].signal.remote(signal.SIGTERM, 0))  # Cancel: rank 0 decides
    try:
        return _wait(ray, runs)
    finally:
        for agent in agents:
            ray.kill(agent)  # a node's ranks die with its actor
        remove_placement_group(group)


def _ready(ray: Any, group: Any) -> bool:
    ready, _ = ray.wait([group.ready()], timeout=WAIT_NOTE_S)
    return bool(ready)


def _wait(ray: Any, runs: list) -> int:
    """Every node's exit statuses as they come; the first failure (a rank's status, or 1 for a node lost)
    ends the wait at once."""
    pending = list(runs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1, timeout=POLL_S)  # a timeout: SIGTERM's handler runs
        if not done:
            continue
        try:
            codes = ray.get(done[0])
        except Exception as exc:  # the actor died: its node (raylet) is gone, or it was killed
            print(f"a node of the job was lost: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}",
                  file=sys.stderr, flush=True)
            return 1
        failed = [c for c in codes if c != 0]
        if failed:
            return failed[0] if failed[0] > 0 else 128 - failed[0]
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.learning.ray_ranks", description=__doc__.splitlines()[0])
    parser.add_argument("job_id", type=int)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus", type=int, default=0, help="GPUs per node (0: one CPU rank per node, gloo)")
    parser.add_argument("--cpus", type=float, default=1.0, help="CPUs each node's bundle asks for")
    args = parser.parse_args(argv)
    return run_ranks(args.job_id, args.nodes, args.gpus, args.cpus)


if __name__ == "__main__":
    sys.exit(main())
