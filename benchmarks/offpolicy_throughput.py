"""Overlapped training against the alternating loop: the same run at max_staleness 0 and 1.

    flock /tmp/rlver-heavy.lock .venv/bin/python benchmarks/offpolicy_throughput.py [--json] \
        [--steps 6 --dialogues 8 --turns 3 --median 1 --p99 8 --model tiny --hidden 64 --layers 2 \
         --ppo-epochs 1 --threads 0 --partial-rollouts on]

The simulated user is the OpenAI-backed Sentient Agent talking to the scripted OpenAI-compatible server
(testkit.scripted_server, in its own process, as a remote API) whose every call waits a lognormal latency
(median --median s, p99 --p99 s); each user turn is two calls. The policy is the testkit's random Qwen2 model
(--hidden/--layers: wider or deeper makes the update take real time while sampling stays cheap) or any
model folder / "default" (SmolLM2) with --model. Both runs use the same config, seed and torch threads and
a fresh server with the same latency seed; only max_staleness differs. A one-step warm-up against the
offline simulator runs first, so neither run pays torch's first-call costs.

Reported (one JSON object with --json): steps; sync_s and overlap_s, the wall time of the training steps
(model loading excluded); speedup = sync_s / overlap_s; max_staleness_seen, the largest lag (learner
version - version of a trained dialogue's oldest reply) over every step of the overlapped run;
dialogues_beyond_bound (must be 0); learner_idle_share_sync / _overlap = 1 - (time in updates / wall time);
update_s_mean; and what produced them (config, latency model, model, threads, code version).

The idle share can only halve when an update takes at least half as long as a step's rollout (the model is
in docs/training-overlap.md, "How to read it"). Measured 2026-11-25 on the idle 2-core machine (the full
table is in that file):
- defaults (tiny policy, update 0.05 s): speedup 1.84, max_staleness_seen 1, 0 beyond the bound, idle share
  0.997 -> 0.989;
- `--hidden 1024 --layers 8 --ppo-epochs 2 --threads 1` (update ~23 s, as long as a rollout; sampling and
  update on a core each, as separate devices): speedup 1.61, idle share 0.496 -> 0.168 (a second run:
  1.70, 0.490 -> 0.176);
- the same with two threads: 1.42, idle 0.608 -> 0.188 (the update and the next step's sampling share the
  cores: the mean update goes 12.4 -> 18.1 s).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def train_config(args: argparse.Namespace, model: str, max_staleness: int, base_url: str, out: Path):
    from trainer.config import TrainConfig

    return TrainConfig(model=model, algorithm="grpo", group_size=2, dialogues_per_step=args.dialogues,
                       minibatch_size=args.dialogues, micro_batch_size=min(4, args.dialogues), steps=args.steps,
                       max_turns=args.turns, max_new_tokens=args.new_tokens, max_dialogue_tokens=2048,
                       actor_lr=1e-4, ppo_epochs=args.ppo_epochs, simulator="openai:scripted",
                       simulator_base_url=base_url, simulator_max_in_flight=64, simulator_max_retries=0,
                       max_staleness=max_staleness, partial_rollouts=args.partial_rollouts == "on", seed=args.seed,
                       save_every=0, store_dialogues=False, report_to=["none"],
                       output_dir=str(out / f"staleness-{max_staleness}"))


def run(args: argparse.Namespace, model: str, max_staleness: int, out: Path) -> dict:
    """One training run of args.steps steps against a fresh latency server; its wall time and step metrics."""
    from benchmarks.rollout_throughput import server_process
    from trainer.learning.rl_trainer import RLTrainer

    server, base_url = server_process({"latency_median_s": args.median, "latency_p99_s": args.p99,
                                        "seed": args.seed})
    try:
        trainer = RLTrainer(train_config(args, model, max_staleness, base_url, out))
        t0 = time.monotonic()
        try:
            steps = [trainer.train_step(step) for step in range(1, args.steps + 1)]
        finally:
            trainer._stop_overlap()
        wall = time.monotonic() - t0
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    busy = sum(m["learner_busy_s"] for m in steps)
    return {"wall_s": wall, "learner_busy_s": busy, "learner_idle_share": 1.0 - busy / wall,
            "max_lag": max(m.get("policy_lag_max", 0.0) for m in steps),
            "beyond_bound": sum(m["dialogues_beyond_bound"] for m in steps),
            "dialogues_lost": sum(m["dialogues_lost"] for m in steps),
            "update_s_mean": busy / len(steps), "reward_mean": [m["reward_mean"] for m in steps]}


def warm_up(model: str, out: Path) -> None:
    from trainer.config import TrainConfig
    from trainer.learning.rl_trainer import RLTrainer

    cfg = TrainConfig(model=model, algorithm="grpo", group_size=2, dialogues_per_step=2, minibatch_size=2,
                      micro_batch_size=2, steps=1, max_turns=1, max_new_tokens=4, max_dialogue_tokens=1024,
                      save_every=0, store_dialogues=False, report_to=["none"], output_dir=str(out / "warm-up"))
    RLTrainer(cfg).train_step(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--dialogues", type=int, default=8, help="dialogues per step (GRPO groups of 2)")
    ap.add_argument("--turns", type=int, default=3, help="policy turns per dialogue")
    ap.add_argument("--new-tokens", type=int, default=16, help="max new tokens per policy turn")
    ap.add_argument("--median", type=float, default=1.0, help="simulator call latency: lognormal median, seconds")
    ap.add_argument("--p99", type=float, default=8.0, help="simulator call latency: lognormal p99, seconds")
    ap.add_argument("--model", default="tiny", help="tiny (testkit/tiny_model.py), default (SmolLM2) or a folder")
    ap.add_argument("--hidden", type=int, default=64, help="the tiny policy's hidden size (wider: a slower update)")
    ap.add_argument("--layers", type=int, default=2, help="the tiny policy's decoder layers")
    ap.add_argument("--ppo-epochs", type=int, default=1, help="passes over each step's batch (a longer update)")
    ap.add_argument("--partial-rollouts", choices=("on", "off"), default="on",
                    help="the overlapped run: in-flight dialogues continue under new weights (on) or not (off)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0: torch's default). 1 gives sampling and the update a core each when they "
                         "overlap, as separate devices would; both runs use the same setting")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = ap.parse_args()
    for name in ("steps", "dialogues", "turns", "new_tokens", "hidden", "layers", "ppo_epochs"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.threads < 0:
        ap.error(f"--threads must be 0 (torch's default) or more, got {args.threads}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.dialogues % 2:
        ap.error(f"--dialogues must be even (GRPO groups of 2), got {args.dialogues}")
    if not 0 < args.median <= args.p99:
        ap.error(f"--median must be > 0 and <= --p99 ({args.p99}), got {args.median}")
    # --json: stdout carries the one JSON object; the trainer's step lines and library notices go to stderr
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        result, sync, overlap = measure(args)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{args.steps} steps x {args.dialogues} dialogues x {args.turns} turns, {result['setup']['latency']}, "
          f"policy {args.model}")
    print("| run | wall s | learner idle share | mean update s | max lag |")
    print("|---|---:|---:|---:|---:|")
    for name, r in (("max_staleness 0", sync), ("max_staleness 1", overlap)):
        print(f"| {name} | {r['wall_s']:.1f} | {r['learner_idle_share']:.1%} | {r['update_s_mean']:.2f} | "
              f"{r['max_lag']:.0f} |")
    print(f"speedup {result['speedup']:.2f}x; dialogues beyond the bound: {overlap['beyond_bound']:.0f}")


def measure(args: argparse.Namespace) -> tuple[dict, dict, dict]:
    """(the JSON result, the on-policy run, the overlapped run)."""
    import torch

    from storage import code_version
    from testkit.tiny_model import build_tiny_model

    out = Path(tempfile.mkdtemp(prefix="offpolicy_throughput-"))
    model = (str(build_tiny_model(out / "tiny", hidden_size=args.hidden, num_layers=args.layers))
             if args.model == "tiny" else args.model)
    warm_up(model, out)
    sync, overlap = run(args, model, 0, out), run(args, model, 1, out)
    result = {
        "steps": args.steps, "sync_s": round(sync["wall_s"], 2), "overlap_s": round(overlap["wall_s"], 2),
        "speedup": round(sync["wall_s"] / overlap["wall_s"], 3), "max_staleness_seen": overlap["max_lag"],
        "dialogues_beyond_bound": overlap["beyond_bound"],
        "learner_idle_share_sync": round(sync["learner_idle_share"], 4),
        "learner_idle_share_overlap": round(overlap["learner_idle_share"], 4),
        "update_s_mean": {"sync": round(sync["update_s_mean"], 3), "overlap": round(overlap["update_s_mean"], 3)},
        "dialogues_lost": {"sync": sync["dialogues_lost"], "overlap": overlap["dialogues_lost"]},
        "setup": {"model": f"tiny (hidden {args.hidden}, {args.layers} layers)" if args.model == "tiny" else args.model,
                  "dialogues_per_step": args.dialogues, "group_size": 2, "turns": args.turns,
                  "ppo_epochs": args.ppo_epochs, "torch_threads": torch.get_num_threads(),
                  "new_tokens": args.new_tokens, "algorithm": "grpo", "seed": args.seed,
                  "simulator": "openai:scripted (testkit.scripted_server), preset rlver-hard",
                  "latency": f"lognormal, median {args.median:g} s, p99 {args.p99:g} s, per call",
                  "off_policy_estimator": "decoupled_ppo", "partial_rollouts": args.partial_rollouts,
                  "code_version": code_version()},
    }
    return result, sync, overlap


if __name__ == "__main__":
    main()
