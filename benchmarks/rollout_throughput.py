"""Rollout throughput: orchestration overlap and policy decode speed. Prints a table.

    flock /tmp/rlver-heavy.lock .venv/bin/python benchmarks/rollout_throughput.py

(a) orchestration: 32 dialogues x 8 policy turns against the scripted OpenAI-compatible server
    (testkit.scripted_server, in its own process) answering every simulator call after 200 ms, with the tiny policy.
    Each user turn is two calls (emotion step, then reply step), so a round cannot take less than
    2 x 200 ms plus the policy's batch time. "ideal" = policy time + rounds x 2 x latency (every call
    of a round overlapped); "sequential" = one dialogue and one call at a time, as the reference code
    ran, measured on --sequential-sample dialogues and scaled to all of them (each costs the same).
(b) decode: SmolLM2-135M-Instruct tokens/s at batch 1 / 4 / 16, transformers engine vs vLLM engine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _timed(engine):
    """Wrap engine.generate_ids to add up the policy's own time."""
    stats = {"seconds": 0.0, "calls": 0}
    inner = engine.generate_ids

    def generate_ids(prompt_ids, params):
        t0 = time.perf_counter()
        try:
            return inner(prompt_ids, params)
        finally:
            stats["seconds"] += time.perf_counter() - t0
            stats["calls"] += 1

    engine.generate_ids = generate_ids
    return stats


_SERVER = """
import sys
from testkit.scripted_server import start_server
server = start_server(latency_s=float(sys.argv[1]))
print(server.base_url, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
server.stop()
"""


def _server_process(latency: float):
    """The scripted server in its own process, as a remote API would be: its request threads do not
    compete with the rollout's event loop for this process's interpreter lock."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", _SERVER, str(latency)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    return proc, proc.stdout.readline().strip()


def orchestration(n_dialogues: int, turns: int, latency: float, sequential_sample: int, tiny_dir: Path) -> list:
    from simulator.builtin_personas import BUILTIN_PROFILES
    from simulator.rules import EmotionRules
    from trainer.engines import make_engine
    from trainer.rollout import RolloutConfig, RolloutEngine, make_simulator_factory
    from testkit.tiny_model import build_tiny_model

    policy = make_engine(str(build_tiny_model(tiny_dir)))
    profiles = [p for p in BUILTIN_PROFILES if p.language == "en" and p.first_line][:8]
    group = max(1, n_dialogues // len(profiles))
    # Every dialogue runs the full number of turns: no success/failure/goodbye end.
    rules = EmotionRules(name="bench", max_turns=turns, success_at=1e9, failure_below=-1e9, end_on_goodbye=False)
    config = RolloutConfig(max_turns=turns, max_new_tokens=8, seed=0)
    server, base_url = _server_process(latency)
    try:
        factory = make_simulator_factory("openai:scripted", rules=rules, base_url=base_url,
                                         api_key="unused", max_retries=0)
        stats = _timed(policy)
        t0 = time.perf_counter()
        samples = RolloutEngine(policy, factory, config=config).run(profiles, group_size=group)
        wall = time.perf_counter() - t0
        bad = [s.error for s in samples if s.status != "finished" or s.n_turns != turns]
        if bad:
            raise RuntimeError(f"{len(bad)} dialogues did not run {turns} turns: {bad[0]}")
        rounds, policy_s = stats["calls"], stats["seconds"]
        ideal = policy_s + rounds * 2 * latency

        t0 = time.perf_counter()
        for p in profiles[:sequential_sample]:  # one dialogue at a time; inside it one call at a time
            RolloutEngine(policy, factory, config=config).run([p], group_size=1)
        seq = (time.perf_counter() - t0) * len(samples) / sequential_sample
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    n = len(samples)
    return [
        ("(a) orchestration", f"{n} dialogues x {turns} turns, {latency * 1000:.0f} ms per simulator call", ""),
        ("  wall time (batched rounds + asyncio)", f"{wall:.1f} s", f"{rounds} rounds, policy {policy_s:.1f} s"),
        ("  ideal bound", f"{ideal:.1f} s", f"ideal / wall = {ideal / wall:.2f} (target >= 0.9)"),
        ("  sequential loop", f"{seq:.1f} s", f"measured on {sequential_sample} dialogues, scaled x"
                                              f"{n / sequential_sample:.0f}; speed-up {seq / wall:.1f}x "
                                              f"(target >= 20x)"),
    ]


def _decode_rate(engine, batch: int, new_tokens: int, repeats: int) -> float:
    from trainer.engines import SamplingConfig

    chat = [{"role": "system", "content": "You are a kind listener."},
            {"role": "user", "content": "My sister forgot my birthday again. I keep saying it does not matter."}]
    engine.generate([chat], SamplingConfig(max_new_tokens=4, seed=0))  # warm-up
    best = 0.0
    for r in range(repeats):
        t0 = time.perf_counter()
        gens = engine.generate([chat] * batch, SamplingConfig(max_new_tokens=new_tokens, seed=r))
        rate = sum(len(g.token_ids) for g in gens) / (time.perf_counter() - t0)
        best = max(best, rate)
    return best


def decode(batches: list[int], new_tokens: int, repeats: int) -> list:
    from trainer.engines import make_engine

    hf = make_engine("default")
    hf_rates = {b: _decode_rate(hf, b, new_tokens, repeats) for b in batches}
    del hf
    vllm = make_engine("vllm:default", dtype="float32", max_model_len=2048)
    vllm_rates = {b: _decode_rate(vllm, b, new_tokens, repeats) for b in batches}
    vllm.close()
    rows = [("(b) decode", f"SmolLM2-135M-Instruct, {new_tokens} new tokens, best of {repeats}", "")]
    for b in batches:
        rows.append((f"  batch {b}", f"transformers {hf_rates[b]:.0f} tok/s | vLLM {vllm_rates[b]:.0f} tok/s",
                     f"vLLM / transformers = {vllm_rates[b] / hf_rates[b]:.1f}x"
                     + (" (target >= 3x)" if b == max(batches) else "")))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dialogues", type=int, default=32)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.2, help="seconds per simulator call")
    ap.add_argument("--sequential-sample", type=int, default=4)
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-orchestration", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--tiny-dir", default=str(Path(os.environ.get("TMPDIR", "/tmp")) / "rlver_bench_tiny"))
    args = ap.parse_args()
    rows = []
    if not args.skip_orchestration:
        rows += orchestration(args.dialogues, args.turns, args.latency, args.sequential_sample, Path(args.tiny_dir))
    if not args.skip_decode:
        rows += decode([int(b) for b in args.batches.split(",")], args.new_tokens, args.repeats)
    width = max(len(r[0]) for r in rows)
    mid = max(len(r[1]) for r in rows)
    print(f"\n{'measure'.ljust(width)}  {'result'.ljust(mid)}  note")
    print("-" * (width + mid + 40))
    for name, value, note in rows:
        print(f"{name.ljust(width)}  {value.ljust(mid)}  {note}")


if __name__ == "__main__":
    main()
