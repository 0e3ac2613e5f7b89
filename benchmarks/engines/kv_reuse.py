"""Prefill across turns: the transformers engine with a dialogue's KV cache kept between turns against
prefilling the whole dialogue every turn (keep_kv=0), on the tiny test model and SmolLM2-135M-Instruct.

    python benchmarks/engines/kv_reuse.py [--dialogues 4] [--turns 10] [--user-tokens 24] [--new-tokens 16]
        [--decode generate|static] [--json]

D dialogues are played side by side, one batch per turn (the rollout's "rounds" schedule; --decode picks the
engine's decode path, "static" being the CUDA default, run eagerly here):
each turn every dialogue gets its sampled reply and a user message of U random ids appended. Both engines
share one model and sample with the same per-dialogue seeds; the table gives the prompt tokens each engine
ran through the model per dialogue (engine.stats), that over the dialogue's final length, and the wall
time of all turns (best of --repeats), and checks that both sampled the same ids.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def play(engine: Any, dialogues: int, turns: int, user_tokens: int, new_tokens: int) -> tuple[list, float]:
    """(the dialogues' final ids, wall seconds) for D dialogues of K turns through `engine`."""
    import torch

    from trainer.policies import SamplingConfig

    g = torch.Generator().manual_seed(0)
    vocab = engine.tokenizer.vocab_size
    prompts = [torch.randint(3, vocab, (user_tokens + 4 * d,), generator=g).tolist() for d in range(dialogues)]
    params = SamplingConfig(temperature=1.0, max_new_tokens=new_tokens)
    t0 = time.perf_counter()
    for turn in range(turns):
        replies = engine.generate_ids(prompts, params, seeds=[100 * d + turn for d in range(dialogues)])
        prompts = [p + list(r.token_ids) + torch.randint(3, vocab, (user_tokens,), generator=g).tolist()
                   for p, r in zip(prompts, replies)]
    return prompts, time.perf_counter() - t0


def measure(name: str, path: Path, args: argparse.Namespace) -> list[dict]:
    from trainer.policies.hf_engine import HFEngine

    after = HFEngine(path, device="cpu", decode=args.decode)
    before = HFEngine(path, device="cpu", model=after.model, tokenizer=after.tokenizer, decode=args.decode, keep_kv=0)
    engines = {"before (prefill every turn)": before, "after (KV kept between turns)": after}
    walls: dict[str, list[float]] = {label: [] for label in engines}
    prefill, finals = {}, {}
    for _ in range(args.repeats):  # the two engines take turns, so both see the same machine load
        for label, engine in engines.items():
            engine.kept.clear()  # each repeat starts cold (no cache kept from the previous repeat)
            start = engine.stats["prefill_tokens"]
            finals[label], wall = play(engine, args.dialogues, args.turns, args.user_tokens, args.new_tokens)
            walls[label].append(wall)
            prefill[label] = (engine.stats["prefill_tokens"] - start) / args.dialogues
    rows = []
    for label in engines:
        length = sum(len(f) for f in finals[label]) / args.dialogues
        rows.append({"model": name, "engine": f"{args.decode}: {label}", "final_length": round(length, 1),
                     "prefill_per_dialogue": round(prefill[label], 1),
                     "prefill_over_length": round(prefill[label] / length, 2), "wall_s": round(min(walls[label]), 3)})
    same = len(set(json.dumps(f) for f in finals.values())) == 1
    for r in rows:
        r["same_ids"] = same
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dialogues", type=int, default=4)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--user-tokens", type=int, default=24)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--decode", choices=["generate", "static"], default="generate", help="the engine's decode path")
    p.add_argument("--skip-smollm", action="store_true", help="the tiny model only")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from testkit.tiny_model import build_tiny_model
    from trainer.policies.base import resolve_policy

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += measure("tiny (testkit)", build_tiny_model(Path(tmp) / "tiny"), args)
    if not args.skip_smollm:
        rows += measure("SmolLM2-135M-Instruct", Path(resolve_policy("default")), args)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{args.dialogues} dialogues x {args.turns} turns, {args.user_tokens} user tokens and <= {args.new_tokens} "
          f"new tokens a turn, CPU float32, best of {args.repeats}")
    print("| model | engine | final length | prefill / dialogue | prefill / length | wall s | same ids |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['model']} | {r['engine']} | {r['final_length']} | {r['prefill_per_dialogue']} | "
              f"{r['prefill_over_length']} | {r['wall_s']} | {'yes' if r['same_ids'] else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
