"""Does the plan's time per step match a real step? The plan of a preset (its probe, trainer.plan_probe),
then real steps of the same config in a fresh process-local trainer, the last one timed.

    flock /tmp/rlver-heavy.lock .venv/bin/python benchmarks/plan_time_check.py [--preset cpu-demo] [--steps 2] [--json]

Prints the plan's seconds_per_step, the real step's seconds, their ratio (plan / real; 1.25 and 0.8 bound
"within 25%") and the machine it ran on: cores, torch threads and the 1-minute load before and after. Run it
on an idle machine: the plan and the real step each count whatever else runs beside them, and a load that
changes between the two makes the ratio say more about the machine than about the plan.

The memory side at scale, for benchmarks/gpu_check.py (its sections logits, paper_shape and prefill are the
scale_* functions below):

- logits: peak memory (CUDA: torch.cuda.max_memory_allocated; CPU: the peak resident size) and time of token
  log-probs + entropy, forward and backward, at N positions through a [V, H] head: the full [N, V] float32
  computation against trainer.learning.head_logprobs (a chunk at a time, recomputed in the backward), their
  largest difference, and the plan's figure for the chunk (trainer.plan_memory.logit_chunk_bytes);
  liger-kernel's fused linear cross-entropy too when it is installed (not a dependency of the lab).
- paper_shape: Qwen2.5-7B's widths and vocabulary (hidden 3584, MLP 18944, 28 heads, 4 KV heads, 152,064 ids)
  at 4 layers, bf16 on a GPU: one forward/backward of the learner's loss path (hidden states, chunked head)
  at T tokens with gradient checkpointing, the peak it adds against the plan's activations + gradients.
- prefill: a dialogue of K turns through the transformers engine (each turn the reply and a user message of
  U tokens appended): the prompt tokens it ran through the model (its stats["prefill_tokens"]), against the
  dialogue's final length. The generate path keeps a dialogue's KV cache between turns (< 1 x); the static
  path (the default on CUDA) still prefills the whole dialogue every turn (about K/2 x).

`python benchmarks/gpu_check.py --tiny` dry-runs every section on CPU at a toy size.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def real_step_seconds(config, steps: int) -> float:
    """Train `steps` steps of the config (no checkpoints, no dialogues stored) and time the last."""
    from trainer.learning.rl_trainer import RLTrainer

    with tempfile.TemporaryDirectory(prefix="plan-check-") as out:
        trainer = RLTrainer(replace(config, steps=steps, save_every=0, store_dialogues=False, report_to=["none"],
                                    output_dir=out))
        seconds = 0.0
        try:
            for step in range(1, steps + 1):
                t0 = time.monotonic()
                trainer.train_step(step)
                seconds = time.monotonic() - t0
        finally:
            close = getattr(trainer.policy_engine, "close", None)
            if close:
                close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="cpu-demo")
    p.add_argument("--steps", type=int, default=2, help="real steps to train; the last is timed (default 2: "
                   "the first loads what loads lazily, as the plan's warm-up does)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    import torch

    from trainer.config import TrainConfig
    from trainer.plan import plan_config
    from trainer.presets import preset_dict

    config = TrainConfig.from_dict(preset_dict(args.preset))
    load_before = os.getloadavg()[0]
    t0 = time.monotonic()
    plan = plan_config(config)
    plan_s = time.monotonic() - t0
    if plan.seconds_per_step is None:
        print(f"plan_time_check: the plan of {args.preset} has no time ({plan.notes[-1]})", file=sys.stderr)
        return 1
    real = real_step_seconds(config, max(1, args.steps))
    out = {"preset": args.preset, "plan_seconds_per_step": plan.seconds_per_step, "real_step_seconds": round(real, 1),
           "ratio": round(plan.seconds_per_step / real, 3), "within_25_percent": 0.8 <= plan.seconds_per_step / real
           <= 1.25, "plan_wall_s": round(plan_s, 1), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
           "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
           "probe_note": plan.notes[-1]}
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key:>24}: {value}")
    return 0


PAPER_SHAPE_4_LAYERS = dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=4, num_attention_heads=28,
                            num_key_value_heads=4, vocab_size=152064)  # Qwen2.5-7B-Instruct's config.json, 4 layers
TINY_SCALE_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, vocab_size=8192)


def _peak_meter(device: str) -> tuple[Any, Any]:
    """(reset(), peak_bytes_since_reset()) for the device."""
    import torch

    if device == "cuda":
        def reset() -> int:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            return torch.cuda.memory_allocated()

        return reset, lambda base: torch.cuda.max_memory_allocated() - base
    from trainer.plan_probe import peak_rss_bytes, reset_peak_rss, rss_bytes

    def reset_cpu() -> int:
        reset_peak_rss()
        return rss_bytes()

    return reset_cpu, lambda base: peak_rss_bytes(True) - base


def scale_logits(device: str, positions: int, hidden: int, vocab: int) -> dict:
    """Full against chunked log-probs + entropy (module docstring)."""
    import torch
    from torch import nn

    from trainer.learning.head_logprobs import head_logprobs
    from trainer.plan_memory import logit_chunk_bytes

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    head = nn.Linear(hidden, vocab, bias=False, device=device, dtype=dtype)
    labels = torch.randint(0, vocab, (positions,), device=device)
    reset, peak = _peak_meter(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def full(h: Any) -> tuple[Any, Any]:
        logp = torch.log_softmax(head(h).float(), dim=-1)
        return logp.gather(1, labels[:, None]).squeeze(1), -(logp.exp() * logp).sum(dim=-1)

    def chunked(h: Any) -> tuple[Any, Any]:
        return head_logprobs(h, head, labels, 1.0, with_entropy=True)

    out: dict = {"positions": positions, "hidden": hidden, "vocab": vocab, "dtype": str(dtype)}
    values = {}
    for name, fn in (("chunked", chunked), ("full", full)):  # chunked first: on CPU freed memory stays resident
        torch.manual_seed(1)  # the same hidden states for both
        hidden_states = torch.randn(positions, hidden, device=device, dtype=dtype, requires_grad=True)
        fn(hidden_states)[0].sum().backward()  # warm-up
        head.weight.grad = None
        base = reset()
        t = time.perf_counter()
        lp, ent = fn(hidden_states)
        (lp.sum() + ent.sum()).backward()
        sync()
        out[f"{name}_ms"] = round((time.perf_counter() - t) * 1e3, 1)
        out[f"{name}_peak_gib"] = round(peak(base) / 2**30, 3)
        values[name] = lp.detach().float()
        head.weight.grad = None
        del lp, ent, hidden_states
    out["max_abs_logprob_diff"] = float((values["full"] - values["chunked"]).abs().max())
    shape = type("Shape", (), {"vocab": vocab, "hidden": hidden})()
    out["plan_chunk_gib"] = round(logit_chunk_bytes(shape, positions, 2 if device == "cuda" else 4) / 2**30, 3)
    try:
        import liger_kernel  # noqa: F401  (optional: only measured where installed)

        out["liger"] = "installed: not yet compared (the lab's chunked path is what trains)"
    except ImportError:
        out["liger"] = "not installed"
    return out


def scale_paper_shape(device: str, folder: Path, shape: dict, tokens: int) -> dict:
    """The learner's loss path on a paper-shaped model at reduced depth (module docstring)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainer.config import TrainConfig
    from trainer.learning.head_logprobs import final_hidden, head_logprobs
    from trainer.plan import shape_from_config
    from trainer.plan_memory import activation_bytes

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = Qwen2Config(tie_word_embeddings=False, max_position_embeddings=max(4096, tokens), **shape)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    model.gradient_checkpointing_enable()
    model.train()
    ids = torch.randint(3, shape["vocab_size"], (1, tokens), device=device)
    reset, peak = _peak_meter(device)
    base = reset()
    t = time.perf_counter()
    hidden = final_hidden(model, model, ids, None)
    lp, ent = head_logprobs(hidden[0, :-1], model.get_output_embeddings(), ids[0, 1:], 1.0, with_entropy=True)
    (lp.sum() + 0.001 * ent.sum()).backward()
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t
    measured = peak(base)
    train = TrainConfig(max_dialogue_tokens=tokens, micro_batch_size=1, max_turns=1, max_new_tokens=tokens,
                        dtype="bfloat16" if device == "cuda" else "float32", gradient_checkpointing=True)
    plan_shape = shape_from_config(config, "paper-shape-4-layers", "benchmarks/plan_time_check.PAPER_SHAPE_4_LAYERS")
    p = 2 if device == "cuda" else 4
    grads = plan_shape.total_params * p  # the gradients the backward allocates (weights were there before)
    planned = activation_bytes(plan_shape, train, device, checkpointing=True) + grads
    return {"tokens": tokens, "params": plan_shape.total_params, "seconds": round(seconds, 2),
            "peak_added_gib": round(measured / 2**30, 3), "plan_activations_plus_grads_gib": round(planned / 2**30, 3),
            "plan_over_measured": round(planned / max(measured, 1), 3)}


def scale_prefill(model_dir: Path, device: str, turns: int, user_tokens: int, new_tokens: int) -> dict:
    """Prompt tokens the engine's forwards took over a K-turn dialogue, against its final length."""
    import torch

    from trainer.policies import SamplingConfig
    from trainer.policies.hf_engine import HFEngine

    engine = HFEngine(model_dir, device=device, dtype=torch.bfloat16 if device == "cuda" else torch.float32)
    g = torch.Generator().manual_seed(0)
    vocab = engine.tokenizer.vocab_size
    dialogue = torch.randint(3, vocab, (user_tokens,), generator=g).tolist()
    for turn in range(turns):
        reply = engine.generate_ids([dialogue], SamplingConfig(temperature=1.0, max_new_tokens=new_tokens),
                                    seeds=[turn])[0]
        dialogue = dialogue + list(reply.token_ids) + torch.randint(3, vocab, (user_tokens,), generator=g).tolist()
    prefill = engine.stats["prefill_tokens"]
    return {"turns": turns, "final_length": len(dialogue), "prefill_tokens": prefill, "decode_path": engine.decode_path,
            "prefill_over_length": round(prefill / len(dialogue), 2),
            "goal": "<= 1.1 (the generate path keeps the KV cache between turns; the static path does not yet)"}


if __name__ == "__main__":
    sys.exit(main())
