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
  largest difference, and the plan's figure for the chunk (trainer.plan_memory.logit_chunk_bytes); on CUDA
  also the maintained fused kernels where installed (not dependencies of the lab; carry their wheels):
  liger-kernel's fused linear cross-entropy and Apple's cut-cross-entropy, both with reduction "none" (token
  log-probs without the entropy, so they stand against `chunked_logprobs_only`).
- paper_shape: Qwen2.5-7B's widths and vocabulary (hidden 3584, MLP 18944, 28 heads, 4 KV heads, 152,064 ids)
  at 4 layers, bf16 on a GPU: one forward/backward of the learner's loss path (hidden states, chunked head)
  at T tokens with gradient checkpointing, the peak it adds against the plan's activations + gradients.
- prefill: a dialogue of K turns through the transformers engine (each turn the reply and a user message of
  U tokens appended): the prompt tokens it ran through the model (its stats["prefill_tokens"]), against the
  dialogue's final length. Both decode paths keep a dialogue's KV cache between turns (< 1 x; about K/2 x
  when every turn is prefilled in full).

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


def _fused_head_kernels(head: Any, labels: Any, device: str) -> dict[str, Any]:
    """Maintained fused linear cross-entropy kernels that are installed (not dependencies of the lab; GPU only):
    name -> fn(hidden) -> token log-probs [N] (their per-token loss with reduction "none", negated)."""
    kernels: dict[str, Any] = {}
    if device != "cuda":
        return kernels
    try:
        from liger_kernel.ops.fused_linear_cross_entropy import LigerFusedLinearCrossEntropyFunction

        def liger(h: Any) -> Any:
            out = LigerFusedLinearCrossEntropyFunction.apply(h, head.weight, labels, None, None, -100, 0.0, 0.0, "none")
            return -(out[0] if isinstance(out, tuple) else out)  # 0.8 returns (loss, z_loss, accuracy, predicted)

        kernels["liger"] = liger
    except ImportError:
        pass
    try:
        from cut_cross_entropy import linear_cross_entropy

        kernels["cut_cross_entropy"] = lambda h: -linear_cross_entropy(h, head.weight, labels, reduction="none")
    except ImportError:
        pass
    return kernels


def scale_logits(device: str, positions: int, hidden: int, vocab: int) -> dict:
    """Token log-probs through a [V, H] head, forward and backward: the full float32 logits, the lab's chunked
    path with and without the entropy, and each installed fused kernel (module docstring)."""
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

    candidates = {  # chunked first: on CPU freed memory stays resident, so the larger peaks come after
        "chunked": lambda h: head_logprobs(h, head, labels, 1.0, with_entropy=True),
        "chunked_logprobs_only": lambda h: head_logprobs(h, head, labels, 1.0)[:1],
        **{name: (lambda h, fn=fn: (fn(h).float(),)) for name, fn in _fused_head_kernels(head, labels, device).items()},
        "full": full,
    }
    out: dict = {"positions": positions, "hidden": hidden, "vocab": vocab, "dtype": str(dtype)}
    values = {}
    for name, fn in candidates.items():
        try:
            torch.manual_seed(1)  # the same hidden states for every candidate
            hidden_states = torch.randn(positions, hidden, device=device, dtype=dtype, requires_grad=True)
            fn(hidden_states)[0].sum().backward()  # warm-up (kernel compilation, autotuning)
            head.weight.grad = None
            base = reset()
            t = time.perf_counter()
            outputs = fn(hidden_states)
            sum(o.sum() for o in outputs).backward()
            sync()
            out[f"{name}_ms"] = round((time.perf_counter() - t) * 1e3, 1)
            out[f"{name}_peak_gib"] = round(peak(base) / 2**30, 3)
            values[name] = outputs[0].detach().float()
            head.weight.grad = None
            del outputs, hidden_states
        except Exception as exc:  # noqa: BLE001 - a kernel that fails here is reported, the others still run
            out[f"{name}_error"] = repr(exc)[:300]
    for name, value in values.items():
        if name != "full" and "full" in values:
            out[f"{name}_max_abs_logprob_diff"] = float((values["full"] - value).abs().max())
    out["max_abs_logprob_diff"] = out.get("chunked_max_abs_logprob_diff")
    shape = type("Shape", (), {"vocab": vocab, "hidden": hidden})()
    out["plan_chunk_gib"] = round(logit_chunk_bytes(shape, positions, 2 if device == "cuda" else 4) / 2**30, 3)
    out["fused_kernels"] = sorted(set(values) - {"full", "chunked", "chunked_logprobs_only"}) or "none installed"
    return out


def scale_paper_shape(device: str, folder: Path, shape: dict, tokens: int) -> dict:
    """The learner's loss path on a paper-shaped model at reduced depth (module docstring)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from trainer.config import TrainConfig
    from trainer.learning.head_logprobs import final_hidden, head_logprobs
    from trainer.plan_shapes import shape_from_config
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
            "goal": "<= 1.1 (both decode paths keep a dialogue's KV cache between its turns)"}


if __name__ == "__main__":
    sys.exit(main())
