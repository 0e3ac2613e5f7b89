"""Decode speed against the bandwidth floor: ms per decode step of the transformers engine's paths ("generate",
"static" = the captured step) at several batch sizes and, at the largest, transformers' own continuous batching
(`generate_batch`), beside one read of the weights; and the two paths' greedy agreement. Run by
benchmarks/gpu_check.py (its `decode` section) and tests/test_gpu.py."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable


def _time_generate(engine: Any, prompts: list, new_tokens: int, sync: Callable[[], None]) -> tuple[float, int]:
    from trainer.policies import SamplingConfig

    sync()
    t = time.perf_counter()
    gens = engine.generate_ids(prompts, SamplingConfig(temperature=1.0, max_new_tokens=new_tokens),
                               seeds=list(range(len(prompts))))
    sync()
    return time.perf_counter() - t, max(len(g.token_ids) for g in gens)


def decode(model_dir: Path, device: str, batches: list[int], new_tokens: int, prompt_len: int,
           env: dict, budget: Any) -> dict:
    """ms per decode step: (time of N new tokens - time of 1) / (steps - 1), best of 2, per path and batch."""
    import torch

    from trainer.policies.hf_engine import HFEngine

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    base = HFEngine(model_dir, device=device, dtype=dtype, decode="generate")
    fast = HFEngine(model_dir, device=device, model=base.model, tokenizer=base.tokenizer, decode="static")
    weight_bytes = sum(p.numel() * p.element_size() for p in base.model.parameters())
    out: dict = {"weights_gib": round(weight_bytes / 2**30, 3), "new_tokens": new_tokens, "prompt_tokens": prompt_len}
    bw = env.get("bandwidth_tbps")
    floor_ms = weight_bytes / (bw * 1e12) * 1e3 if bw else None
    out["floor_ms"] = round(floor_ms, 3) if floor_ms else None
    g = torch.Generator().manual_seed(0)
    rows: list = []
    for batch in batches:
        prompts = torch.randint(3, base.tokenizer.vocab_size, (batch, prompt_len), generator=g).tolist()
        for name, engine in (("generate", base), ("static", fast)):
            if budget.left() < 30:
                rows.append({"batch": batch, "path": name, "skipped": "time budget"})
                continue
            try:
                _time_generate(engine, prompts, 4, sync)  # warm-up (the static path captures its graph here)
                best = None
                for _ in range(2):
                    one, _ = _time_generate(engine, prompts, 1, sync)
                    full, steps = _time_generate(engine, prompts, new_tokens, sync)
                    ms = (full - one) / max(steps - 1, 1) * 1e3
                    best = ms if best is None else min(best, ms)
                row = {"batch": batch, "path": name, "path_used": engine.decode_path, "ms_per_step": round(best, 3),
                       "tokens_per_s": round(batch * 1e3 / best, 1)}
                if floor_ms:
                    row["x_floor"] = round(best / floor_ms, 2)
            except Exception as exc:  # noqa: BLE001 - the other path and batches still run
                row = {"batch": batch, "path": name, "error": repr(exc)[:400]}
            rows.append(row)
            print(f"[gpu_check] decode {row}", flush=True)
        if batch == max(batches) and budget.left() >= 60:  # a manager starts and stops each call: one batch
            row = {"batch": batch, "path": "generate_batch"}
            try:  # transformers' continuous batching (paged cache, its own CUDA graphs): the library to beat
                best = _generate_batch_ms(base.model, prompts, new_tokens)
                row.update(ms_per_step=round(best, 3), tokens_per_s=round(batch * 1e3 / best, 1),
                           **({"x_floor": round(best / floor_ms, 2)} if floor_ms else {}))
            except Exception as exc:  # noqa: BLE001
                row["error"] = repr(exc)[:400]
            rows.append(row)
            print(f"[gpu_check] decode {row}", flush=True)
    out["rows"] = rows
    out["greedy_agreement"] = _agreement(base, fast, torch, device)
    out["static_graph_captures"] = fast.static_captures
    out["static_error"] = fast.static_error  # set when the static path failed and the engine fell back
    return out


def _generate_batch_ms(model: Any, prompts: list, new_tokens: int) -> float:
    """ms per decode step of transformers' `generate_batch` (continuous batching), greedy, end of text off: the
    median over requests of (last token's time - first token's time) / (tokens - 1), from its own per-token
    timestamps (its manager's start-up and shut-down stay out), after a warm-up run."""
    import statistics

    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=-1, pad_token_id=0)
    model.generate_batch(prompts, generation_config=config)  # warm-up: graphs, kernels
    out = model.generate_batch(prompts, generation_config=config, record_timestamps=True)
    return statistics.median((o.timestamps[-1] - o.timestamps[0]) / (len(o.timestamps) - 1) * 1e3
                             for o in out.values() if o.timestamps and len(o.timestamps) > 1)


def _agreement(base: Any, fast: Any, torch: Any, device: str) -> dict:
    """Greedy replies of both paths on 4 prompts: the share of tokens equal up to the first difference, and the
    largest log-prob difference on the first token (bf16 on GPUs: the paths' float rounding differs)."""
    from trainer.policies import SamplingConfig

    prompts = torch.randint(3, base.tokenizer.vocab_size, (4, 32), generator=torch.Generator().manual_seed(1)).tolist()
    params = SamplingConfig(temperature=0, max_new_tokens=16)
    a, b = base.generate_ids(prompts, params), fast.generate_ids(prompts, params)
    same = [next((i for i, (x, y) in enumerate(zip(p.token_ids, q.token_ids)) if x != y), min(len(p.token_ids),
                 len(q.token_ids))) for p, q in zip(a, b)]
    return {"equal_prefix_tokens": same, "first_logprob_abs_diff": round(max(abs(p.logprobs[0] - q.logprobs[0])
                                                                            for p, q in zip(a, b)), 5)}
