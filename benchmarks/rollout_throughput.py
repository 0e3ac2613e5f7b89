"""Rollout throughput: the async loop against rounds, its critical-path bound, and policy decode speed.

    flock /tmp/rlver-heavy.lock .venv/bin/python benchmarks/rollout_throughput.py \
        --dialogues 64 --turns 8 --latency lognormal --median 1 --p99 8 --skip-decode [--json]

(a) orchestration: D dialogues x T policy turns against the scripted OpenAI-compatible server
    (testkit.scripted_server, in its own process) with the tiny policy. Every simulator call waits a
    latency: fixed (--median seconds) or lognormal (median and p99); --rate-429 answers that share of calls
    HTTP 429 (the backend retries them). Each user turn is two calls (emotion step, reply step).
    - wall: the async schedule (each dialogue goes on as soon as its own user answered);
    - rounds wall: the rounds schedule (every round waits for the slowest user) on the same dialogues;
    - bound: the critical path, the longest single dialogue's own simulator time (its user turns' measured
      latencies, retries and client overhead included) plus the policy time of its own turns (the wall time
      of each batch that sampled one of them); bound / wall near 1 means no dialogue waited on another.
      The JSON also has share_bound_s, which counts only each turn's share of its batch (wall / size);
    - sequential: one dialogue and one call at a time, as the reference code ran, measured on
      --sequential-sample dialogues and scaled to all of them (0 skips it).
(b) decode: SmolLM2-135M-Instruct tokens/s at batch 1 / 4 / 16, transformers engine (--hf-decode picks its
    path) vs vLLM engine (--skip-vllm leaves it out); --with-generate-batch adds transformers' continuous
    batching (`generate_batch`) on the same model, measured the same way.
--json prints one object (wall_s, rounds_wall_s, bound_s, dialogues, turns, ...) instead of the table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _timed(engine):
    """Wrap engine.generate_ids to add up the policy's own time and keep, per prompt, the wall time of the
    batch that answered it (stats["batch_s"][prompt ids] -> [seconds, ...])."""
    stats = {"seconds": 0.0, "calls": 0, "batch_s": {}}
    inner = engine.generate_ids

    def generate_ids(prompt_ids, params, seeds=None):
        t0 = time.perf_counter()
        try:
            return inner(prompt_ids, params, seeds)
        finally:
            wall = time.perf_counter() - t0
            stats["seconds"] += wall
            stats["calls"] += 1
            for ids in prompt_ids:
                stats["batch_s"].setdefault(tuple(ids), []).append(wall)

    engine.generate_ids = generate_ids
    return stats


# The server in its own process; its latency model (testkit.server_latency) draws the delays and answers
# the 429 share with a Retry-After header.
_SERVER = """
import json, sys
from testkit.scripted_server import start_server
server = start_server(**json.loads(sys.argv[1]))
print(server.base_url, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
server.stop()
"""


def server_process(server_kw: dict):
    """The scripted server in its own process, as a remote API would be: its request threads do not
    compete with the rollout's event loop for this process's interpreter lock."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", _SERVER, json.dumps(server_kw)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parent.parent)
    return proc, proc.stdout.readline().strip()


def critical_path(samples: list, events: list, batch_s: dict) -> tuple[float, float]:
    """(bound, share bound): the longest dialogue's own simulator time plus the wall time of every batch that
    sampled one of its turns; the share bound counts each turn's share of its batch (wall / batch size)."""
    simulator = {s.key: 0.0 for s in samples}
    shares = dict(simulator)
    for ev in events:
        if ev.kind == "turn":
            side = simulator if ev.turn["role"] == "user" else shares
            side[ev.key] += float(ev.turn.get("latency_s") or 0.0)
    policy = {}
    for s in samples:  # direct mode: turn k's prompt is the sample's ids before its sampled span
        policy[s.key] = sum(batch_s[tuple(s.input_ids[:a])].pop(0) for a, _ in s.turn_spans)
    return (max(simulator[k] + policy[k] for k in simulator), max(simulator[k] + shares[k] for k in simulator))


def orchestration(n_dialogues: int, turns: int, server_kw: dict, sequential_sample: int, tiny_dir: Path) -> dict:
    from simulator.llm.traffic import TrafficLimits
    from simulator.personas.builtin import BUILTIN_PROFILES
    from simulator.user.rules import EmotionRules
    from simulator.user.spec import SimulatorSpec
    from testkit.tiny_model import build_tiny_model
    from trainer.policies import SamplingConfig, make_policy_engine
    from trainer.rollout.dialogue_rollout import DialogueRollout, RolloutConfig

    policy = make_policy_engine(str(build_tiny_model(tiny_dir)))
    policy.generate([[{"role": "user", "content": "hi"}]], SamplingConfig(max_new_tokens=2), seeds=[0])  # warm-up
    profiles = [p for p in BUILTIN_PROFILES if p.language == "en" and p.first_line][:8]
    group = max(1, n_dialogues // len(profiles))
    # Every dialogue runs the full number of turns: no success/failure/goodbye end.
    rules = EmotionRules(name="bench", max_turns=turns, success_at=1e9, failure_below=-1e9, end_on_goodbye=False)
    server, base_url = server_process(server_kw)
    result = {"dialogues": len(profiles) * group, "turns": turns}
    try:
        traffic = TrafficLimits(max_retries=8 if server_kw.get("rate_limit_share") else 0,
                                max_in_flight=max(32, 2 * n_dialogues))
        factory = SimulatorSpec("openai:scripted", rules=rules, base_url=base_url, api_key="unused",
                                traffic=traffic).factory()
        stats = _timed(policy)
        for schedule in ("async", "rounds"):
            # an empty reply of the random tiny policy is judged like any other, so every dialogue runs T turns
            config = RolloutConfig(max_turns=turns, max_new_tokens=8, seed=0, schedule=schedule, empty_reply="judge",
                                   max_batch=max(32, n_dialogues))
            events: list = []
            stats.update(seconds=0.0, calls=0, batch_s={})
            t0 = time.perf_counter()
            samples = DialogueRollout(policy, factory, config=config, on_event=events.append).run(profiles, group)
            wall = time.perf_counter() - t0
            bad = [s.error for s in samples if s.status != "finished" or s.n_turns != turns]
            if bad:
                raise RuntimeError(f"{schedule}: {len(bad)} dialogues did not run {turns} turns: {bad[0]}")
            if schedule == "async":
                bound, share_bound = critical_path(samples, events, stats["batch_s"])
                result.update(wall_s=wall, bound_s=bound, share_bound_s=share_bound, policy_s=stats["seconds"],
                              batches=stats["calls"])
            else:
                result.update(rounds_wall_s=wall, rounds=stats["calls"], rounds_policy_s=stats["seconds"])
        if sequential_sample:
            config = RolloutConfig(max_turns=turns, max_new_tokens=8, seed=0)
            t0 = time.perf_counter()
            for p in profiles[:sequential_sample]:  # one dialogue at a time; inside it one call at a time
                DialogueRollout(policy, factory, config=config).run([p], group_size=1)
            result["sequential_s"] = (time.perf_counter() - t0) * result["dialogues"] / sequential_sample
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    result["bound_over_wall"] = result["bound_s"] / result["wall_s"]
    result["rounds_over_wall"] = result["rounds_wall_s"] / result["wall_s"]
    return result


def orchestration_rows(r: dict, latency: str) -> list:
    rows = [
        ("(a) orchestration", f"{r['dialogues']} dialogues x {r['turns']} turns, simulator calls: {latency}", ""),
        ("  wall time, async loop", f"{r['wall_s']:.1f} s",
         f"{r['batches']} policy batches, policy {r['policy_s']:.1f} s"),
        ("  critical-path bound", f"{r['bound_s']:.1f} s",
         f"bound / wall = {r['bound_over_wall']:.2f} (target >= 0.9); with policy shares only "
         f"{r['share_bound_s']:.1f} s"),
        ("  wall time, rounds", f"{r['rounds_wall_s']:.1f} s", f"{r['rounds']} rounds, policy "
                                                              f"{r['rounds_policy_s']:.1f} s; rounds / async = "
                                                              f"{r['rounds_over_wall']:.2f}"),
    ]
    if "sequential_s" in r:
        rows.append(("  sequential loop", f"{r['sequential_s']:.1f} s",
                     f"scaled from a sample; speed-up {r['sequential_s'] / r['wall_s']:.1f}x"))
    return rows


CHAT = [{"role": "system", "content": "You are a kind listener."},
        {"role": "user", "content": "My sister forgot my birthday again. I keep saying it does not matter."}]


def _decode_rate(engine, batch: int, new_tokens: int, repeats: int) -> float:
    from trainer.policies import SamplingConfig

    engine.generate([CHAT], SamplingConfig(max_new_tokens=4, seed=0))  # warm-up
    best = 0.0
    for r in range(repeats):
        t0 = time.perf_counter()
        gens = engine.generate([CHAT] * batch, SamplingConfig(max_new_tokens=new_tokens, seed=r))
        rate = sum(len(g.token_ids) for g in gens) / (time.perf_counter() - t0)
        best = max(best, rate)
    return best


def _generate_batch_rate(engine, batch: int, new_tokens: int, repeats: int) -> float:
    """transformers' continuous batching (`generate_batch`) on the engine's model, measured as _decode_rate is:
    new tokens over the call's wall time (its manager's start and stop included: a rollout calls it every turn),
    the same prompt and sampling (T = SamplingConfig's default, top-p 1, the engine's end-of-turn id)."""
    from transformers import GenerationConfig

    from trainer.policies import SamplingConfig

    ids = engine.encode_chat(CHAT)
    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=True, temperature=SamplingConfig().temperature,
                              top_p=1.0, top_k=0, eos_token_id=engine.eos_token_id,
                              pad_token_id=engine.tokenizer.pad_token_id)
    engine.model.generate_batch([ids], generation_config=config)  # warm-up
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = engine.model.generate_batch([ids] * batch, generation_config=config)
        best = max(best, sum(len(o.generated_tokens) for o in out.values()) / (time.perf_counter() - t0))
    return best


def decode(batches: list[int], new_tokens: int, repeats: int, hf_decode: str = "auto",
           with_vllm: bool = True, with_generate_batch: bool = False) -> tuple[list, dict]:
    from trainer.policies import make_policy_engine

    hf = make_policy_engine("default", decode=hf_decode)
    hf_rates = {b: _decode_rate(hf, b, new_tokens, repeats) for b in batches}
    batch_rates = {b: _generate_batch_rate(hf, b, new_tokens, repeats) for b in batches} if with_generate_batch else {}
    path = hf.decode_path
    del hf
    vllm_rates: dict = {}
    if with_vllm:
        vllm = make_policy_engine("vllm:default", dtype="float32", max_model_len=2048)
        vllm_rates = {b: _decode_rate(vllm, b, new_tokens, repeats) for b in batches}
        vllm.close()
    rows = [("(b) decode", f"SmolLM2-135M-Instruct, {new_tokens} new tokens, best of {repeats}, "
                           f"transformers decode path {path}", "")]
    for b in batches:
        if b in batch_rates:
            rows.append((f"  batch {b}", f"transformers {hf_rates[b]:.0f} tok/s | generate_batch {batch_rates[b]:.0f} "
                                         f"tok/s", f"generate_batch / engine = {batch_rates[b] / hf_rates[b]:.2f}x"))
        if not with_vllm:
            if b not in batch_rates:
                rows.append((f"  batch {b}", f"transformers {hf_rates[b]:.0f} tok/s", ""))
            continue
        rows.append((f"  batch {b}", f"transformers {hf_rates[b]:.0f} tok/s | vLLM {vllm_rates[b]:.0f} tok/s",
                     f"vLLM / transformers = {vllm_rates[b] / hf_rates[b]:.1f}x"
                     + (" (target >= 3x)" if b == max(batches) else "")))
    return rows, {"transformers": hf_rates, "vllm": vllm_rates, "transformers_decode": path,
                  "generate_batch": batch_rates}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dialogues", type=int, default=32)
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--latency", choices=("fixed", "lognormal"), default="fixed",
                    help="simulator call latency: fixed (--median seconds) or lognormal (--median, --p99)")
    ap.add_argument("--median", type=float, default=0.2, help="seconds: the fixed latency, or the lognormal median")
    ap.add_argument("--p99", type=float, default=None, help="seconds: the lognormal's 99th percentile")
    ap.add_argument("--rate-429", type=float, default=0.0, help="share of simulator calls answered HTTP 429")
    ap.add_argument("--sequential-sample", type=int, default=4, help="dialogues timed one at a time (0: skip)")
    ap.add_argument("--batches", default="1,4,16")
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-orchestration", action="store_true")
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument("--hf-decode", choices=("auto", "generate", "static"), default="auto",
                    help="the transformers engine's decode path (auto: static on CUDA, generate on CPU)")
    ap.add_argument("--skip-vllm", action="store_true", help="decode: the transformers engine only")
    ap.add_argument("--with-generate-batch", action="store_true",
                    help="decode: also transformers' continuous batching (generate_batch) on the same model")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("--tiny-dir", default=str(Path(os.environ.get("TMPDIR", "/tmp")) / "rlver_bench_tiny"))
    args = ap.parse_args()
    if args.median <= 0 and args.latency == "lognormal":
        ap.error(f"--median must be > 0 for a lognormal latency, got {args.median}")
    if args.latency == "lognormal" and (args.p99 is None or args.p99 < args.median):
        ap.error(f"--p99 must be given and >= --median ({args.median}) for a lognormal latency, got {args.p99}")
    if not 0 <= args.rate_429 <= 1:
        ap.error(f"--rate-429 must be in [0, 1], got {args.rate_429}")
    server_kw: dict = {"rate_limit_share": args.rate_429, "retry_after_s": 0.5} if args.rate_429 else {}
    if args.latency == "fixed":
        server_kw["latency_s"] = args.median
        latency = f"fixed {args.median * 1000:.0f} ms"
    else:
        server_kw.update(latency_median_s=args.median, latency_p99_s=args.p99)
        latency = f"lognormal, median {args.median:g} s, p99 {args.p99:g} s"
    if args.rate_429:
        latency += f", {args.rate_429:.0%} answered 429"
    result, rows = {}, []
    if not args.skip_orchestration:
        result = orchestration(args.dialogues, args.turns, server_kw, args.sequential_sample, Path(args.tiny_dir))
        result["latency"] = latency
        rows += orchestration_rows(result, latency)
    if not args.skip_decode:
        decode_rows, rates = decode([int(b) for b in args.batches.split(",")], args.new_tokens, args.repeats,
                                    args.hf_decode, not args.skip_vllm, args.with_generate_batch)
        rows += decode_rows
        result["decode_tokens_per_s"] = rates
    if args.json:
        print(json.dumps(result))
        return
    width = max(len(r[0]) for r in rows)
    mid = max(len(r[1]) for r in rows)
    print(f"\n{'measure'.ljust(width)}  {'result'.ljust(mid)}  note")
    print("-" * (width + mid + 40))
    for name, value, note in rows:
        print(f"{name.ljust(width)}  {value.ljust(mid)}  {note}")


if __name__ == "__main__":
    main()
