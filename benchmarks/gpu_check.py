"""GPU truth in one run: decode speed against the bandwidth floor, training steps' peak memory against the plan.

    python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json          # on the GPU machine, < 8 min on an H200
    python3 benchmarks/gpu_check.py --sections none --cases grpo-overlap,ppo-lora-gc,ppo-full-generate \
        --out $OUT/gpu_check_2.json                                    # a second call: what the budget skipped
    python benchmarks/gpu_check.py --tiny --out /tmp/gpu_check.json    # the same sections on CPU, a toy shape

The model: a random Qwen2 of Qwen2.5-1.5B's shape (vocabulary cut to the test tokenizer's 512: 1.31 B
parameters, bf16), built from a config on the spot; --tiny a 2-layer toy. Sections, each guarded (an error is
recorded, the next runs) and skipped once the time budget (--budget-s) is spent:

1. decode (benchmarks/engines/decode_floor.py): ms per decode step at batch 1 / 16 / 64 of the engine's paths "generate" and "static" (CUDA graph)
   and, at the largest batch, transformers' `generate_batch` (timed from its per-token timestamps), against the
   bandwidth floor (one read of the weights), plus the two paths' greedy agreement;
2. logits, paper_shape, prefill (benchmarks/plan_time_check.py, scale_*): the LM head chunked against the full
   logits and liger-kernel's / cut-cross-entropy's fused kernels where installed (carry their wheels: `pip
   download --no-deps liger-kernel cut-cross-entropy -d .whl`); Qwen2.5-7B's widths at 4 layers through the
   learner's loss path against the plan; prompt tokens prefilled per 10-turn dialogue against its length;
3. train: `trainer plan` then `trainer train` per case, each in its own process (the rule-based user
   docs/examples/rule_user.py): peak allocated / reserved CUDA memory against the plan's per-GPU figure
   (right when allocated <= plan <= 1.25 x reserved), step time, learner idle share; `pytest -m gpu`
   (tests/test_gpu.py) after the first three cases.

Writes one JSON object (--out) and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
FULL_SHAPE = dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                  num_key_value_heads=2)  # Qwen2.5-1.5B's config.json
TINY_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                  num_key_value_heads=1)
# Memory bandwidth by device name (NVIDIA's data sheets: H200 SXM 4.8 TB/s, H100 SXM 3.35 TB/s, H100 PCIe 2.0 TB/s)
BANDWIDTH_TBPS = {"H200": 4.8, "H100 PCIe": 2.0, "H100": 3.35, "A100": 2.0}
PLAN_SLACK = 1.25  # the plan may exceed the measured reserved memory by at most this factor
SECTIONS = ("decode", "logits", "paper_shape", "prefill")  # the measuring sections, in the order they run


class Budget:
    def __init__(self, seconds: float):
        self.t0, self.seconds = time.monotonic(), seconds

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.t0)


def guarded(results: dict, name: str, budget: Budget, need_s: float, fn: Callable[[], Any]) -> None:
    """Run one section; its result or its error goes into results[name]; skipped when too little time is left."""
    if budget.left() < need_s:
        results[name] = {"skipped": f"{budget.left():.0f} s left of the budget, the section needs ~{need_s:.0f} s"}
        print(f"[gpu_check] {name}: skipped ({results[name]['skipped']})", flush=True)
        return
    t = time.monotonic()
    print(f"[gpu_check] {name} ...", flush=True)
    try:
        results[name] = fn()
    except Exception as exc:  # noqa: BLE001 - one failing section must not lose the others
        results[name] = {"error": repr(exc)[:600], "traceback": traceback.format_exc()[-2500:]}
    if isinstance(results[name], dict):
        results[name]["section_s"] = round(time.monotonic() - t, 1)
    print(f"[gpu_check] {name}: {json.dumps(results[name], default=str)[:1500]}", flush=True)


def environment() -> dict:
    import torch
    import transformers

    env = {"torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.cuda.is_available(),
           "python": sys.version.split()[0]}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_gib=round(props.total_memory / 2**30, 1),
                   bandwidth_tbps=next((v for k, v in BANDWIDTH_TBPS.items() if k in props.name), None))
    return env


def build_model(folder: Path, shape: dict, device: str) -> Path:
    """A random Qwen2 of `shape` with the testkit tokenizer, saved in bf16 to `folder` (kept when there)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from testkit.tiny_model import build_tiny_model

    if (folder / "config.json").exists():
        return folder
    tiny = build_tiny_model(folder.parent / "tokenizer-source")
    folder.mkdir(parents=True, exist_ok=True)
    for f in tiny.iterdir():
        if f.name.startswith("tokenizer") or f.name in ("special_tokens_map.json", "chat_template.jinja",
                                                        "generation_config.json"):
            shutil.copy(f, folder / f.name)
    base = json.loads((tiny / "config.json").read_text())
    config = Qwen2Config(vocab_size=base["vocab_size"], max_position_embeddings=4096, tie_word_embeddings=False,
                         bos_token_id=base.get("bos_token_id"), eos_token_id=base.get("eos_token_id"),
                         pad_token_id=base.get("pad_token_id"), **shape)
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    return folder


_PEAK_WRAPPER = r'''
import atexit, json, os, sys, torch
def _peak():
    if torch.cuda.is_available():
        json.dump({"allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
                   "reserved_gib": torch.cuda.max_memory_reserved() / 2**30}, open(os.environ["PEAK_FILE"], "w"))
atexit.register(_peak)
from trainer.__main__ import main
sys.exit(main(sys.argv[1:]))
'''


def train_case(name: str, config_text: str, gpu_gib: float, timeout: float, workdir: Path, extra_env: dict) -> dict:
    """`trainer plan` and `trainer train` of one config, each in its own process; the peak CUDA memory of the
    training process against the plan."""
    cfg = workdir / f"cfg-{name}.yaml"
    cfg.write_text(config_text)
    env = dict(os.environ, RLVER_LAB_HOME=str(workdir / f"home-{name}"), PEAK_FILE=str(workdir / f"peak-{name}.json"),
               **extra_env)
    rec: dict = {"case": name}
    t0 = time.monotonic()
    try:  # a plan that fails or hangs is recorded; the training still runs
        p = subprocess.run([sys.executable, "-m", "trainer", "plan", "--config", str(cfg), "--gpus", "1",
                            "--gpu-memory", str(gpu_gib), "--json"], capture_output=True, text=True, env=env,
                           timeout=min(timeout, 120), cwd=ROOT)
        plan = json.loads(p.stdout.strip().splitlines()[-1])
        rec["plan_gib"], rec["plan_parts"] = plan.get("per_gpu_gib"), plan.get("parts")
        rec["plan_transients"] = plan.get("transients")
    except subprocess.TimeoutExpired as exc:
        rec["plan_error"] = repr(exc)[:300]
    except (IndexError, ValueError):
        rec["plan_error"] = (p.stdout[-800:] + p.stderr[-1200:])
    timeout = max(timeout - (time.monotonic() - t0), 20)
    t = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", _PEAK_WRAPPER, "train", "--config", str(cfg), "--json"],
                           capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:  # the plan's result stays in the record
        rec.update(train_error=f"training timed out after {timeout:.0f} s (the time budget)",
                   train_wall_s=round(time.monotonic() - t, 1))
        return rec
    rec["train_wall_s"], rec["train_rc"] = round(time.monotonic() - t, 1), p.returncode
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
        m = res.get("metrics") or {}
        rec.update(status=res.get("status"), steps=res.get("steps"), error=res.get("error"),
                   **{k: m.get(k) for k in ("step_s", "rollout_s", "update_s", "learner_idle_share")})
    except (IndexError, ValueError):
        rec["train_error"] = (p.stdout[-800:] + p.stderr[-2000:])
    if p.returncode:
        rec["stderr_tail"] = p.stderr[-2000:]
    peak_file = Path(env["PEAK_FILE"])
    if peak_file.exists():
        peak = json.loads(peak_file.read_text())
        rec.update({k: round(v, 2) for k, v in peak.items()})
        if rec.get("plan_gib") is not None:
            rec["plan_ge_allocated"] = rec["plan_gib"] >= peak["allocated_gib"]
            rec["plan_le_slack_reserved"] = rec["plan_gib"] <= PLAN_SLACK * peak["reserved_gib"]
    return rec


def cases(model_dir: Path, tiny: bool, device: str) -> list[tuple[str, str, dict]]:
    common = (f"model: {model_dir}\npersona_set: builtin:train\n"
              "simulator: python:docs/examples/rule_user.py:make_user\n"
              f"max_turns: 3\nmax_new_tokens: {16 if tiny else 96}\nmax_dialogue_tokens: {256 if tiny else 1024}\n"
              f"temperature: 1.0\nsave_every: 100\nkeep_checkpoints: 1\nseed: 0\nrollout_backend: transformers\n"
              f"dtype: {'float32' if tiny else 'bfloat16'}\ndevice: {device}\nsteps: 2\ndialogues_per_step: 16\n"
              f"minibatch_size: 8\nmicro_batch_size: 4\n")
    return [
        ("ppo-full", common + "algorithm: ppo\n", {}),
        ("ppo-overlap", common + "algorithm: ppo\nmax_staleness: 1\nsteps: 3\n", {}),
        ("grpo-full", common + "algorithm: grpo\ngroup_size: 4\n", {}),
        ("grpo-overlap", common + "algorithm: grpo\ngroup_size: 4\nmax_staleness: 1\nsteps: 3\n", {}),
        ("ppo-lora-gc", common + "algorithm: ppo\nlora: true\ngradient_checkpointing: true\n", {}),
        ("ppo-full-generate", common + "algorithm: ppo\n", {"RLVER_HF_DECODE": "generate"}),
    ]


def run_pytest(timeout: float) -> dict:
    p = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rA", "-p", "no:cacheprovider",
                        "tests/test_gpu.py", f"--timeout={int(min(150, max(timeout - 10, 30)))}"], capture_output=True,
                       text=True, timeout=timeout, cwd=ROOT)
    lines = p.stdout.strip().splitlines()
    return {"rc": p.returncode, "summary": lines[-1] if lines else "",
            "passed": [x for x in lines if x.startswith("PASSED")],
            "failed": [x for x in lines if x.startswith(("FAILED", "ERROR"))], "tail": (p.stdout + p.stderr)[-3000:]}


def table(results: dict) -> str:
    lines = []
    dec = results.get("decode") or {}
    if dec.get("rows"):
        lines.append(f"decode (floor {dec.get('floor_ms')} ms = weights {dec.get('weights_gib')} GiB / bandwidth)")
        lines.append(f"{'batch':>6} {'path':>14} {'ms/step':>9} {'x floor':>8} {'tok/s':>9}")
        for r in dec["rows"]:
            lines.append(f"{r['batch']:>6} {r['path']:>14} {r.get('ms_per_step', '-')!s:>9} "
                         f"{r.get('x_floor', '-')!s:>8} "
                         f"{r.get('tokens_per_s', r.get('error', r.get('skipped', '-')))!s:>9}")
    train = [{"case": k[len("train:"):], **v} for k, v in results.items()
             if k.startswith("train:") and isinstance(v, dict)]
    if train:
        lines.append(f"{'case':>18} {'plan':>7} {'alloc':>7} {'reserv':>7} {'ok':>5} {'step_s':>7} {'idle':>6}")
        for r in train:
            ok = (r.get("plan_ge_allocated"), r.get("plan_le_slack_reserved"))
            lines.append(f"{r.get('case', '?'):>18} {r.get('plan_gib', '-')!s:>7} {r.get('allocated_gib', '-')!s:>7} "
                         f"{r.get('reserved_gib', '-')!s:>7} "
                         f"{'yes' if all(ok) else 'NO' if None not in ok else '-':>5} "
                         f"{_round(r.get('step_s'))!s:>7} {_round(r.get('learner_idle_share'))!s:>6}"
                         + (f"  {r.get('skipped') or r.get('error') or r.get('train_error') or ''}"[:120]))
    tests = results.get("tests") or {}
    if tests:
        lines.append(f"pytest -m gpu: {tests.get('summary') or tests.get('skipped') or tests.get('error')}")
    return "\n".join(lines)


def _round(x: Optional[float]) -> Any:
    return round(x, 2) if isinstance(x, (int, float)) else x


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(os.environ.get("OUT", "/tmp")) / "gpu_check.json"))
    ap.add_argument("--tiny", action="store_true", help="a 2-layer toy model on CPU: a dry run of every section")
    ap.add_argument("--budget-s", type=float, default=450.0, help="sections starting after this are skipped")
    ap.add_argument("--workdir", default="/tmp/rlver_gpu_check")
    ap.add_argument("--cases", default="ppo-full,grpo-full,grpo-overlap,ppo-overlap,ppo-lora-gc,ppo-full-generate")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help="the measuring sections to run before the training cases ('none': the cases only)")
    ap.add_argument("--no-tests", action="store_true")
    args = ap.parse_args(argv)
    sections = set(args.sections.split(","))
    if unknown := sections - {"none", *SECTIONS}:
        ap.error(f"--sections: unknown {','.join(sorted(unknown))}: give none or {','.join(SECTIONS)}")
    from benchmarks.engines.decode_floor import decode

    budget = Budget(args.budget_s)
    (workdir := Path(args.workdir)).mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results: dict = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tiny": args.tiny}

    def save() -> None:
        out.write_text(json.dumps(results, indent=1, default=str))

    guarded(results, "env", budget, 0, environment)
    env = results["env"] if "error" not in results["env"] else {}
    device = "cuda" if env.get("cuda") and not args.tiny else "cpu"
    model_dir = workdir / ("tiny-qwen2" if args.tiny else "qwen2-1.5b-shape")
    guarded(results, "build", budget, 20, lambda: {"model": str(build_model(model_dir, TINY_SHAPE if args.tiny
                                                                               else FULL_SHAPE, device))})
    save()
    batches = [1, 4] if args.tiny else [1, 16, 64]
    if "decode" in sections:
        guarded(results, "decode", budget, 60, lambda: decode(model_dir, device, batches, 16 if args.tiny else 96,
                                                              32 if args.tiny else 128, env, budget))
    save()
    from benchmarks.plan_time_check import (PAPER_SHAPE_4_LAYERS, TINY_SCALE_SHAPE, scale_logits, scale_paper_shape,
                                            scale_prefill)

    big = device == "cuda"
    if "logits" in sections:
        guarded(results, "logits", budget, 30, lambda: scale_logits(device, 8192 if big else 512, 3584 if big else 64,
                                                                         152064 if big else 8192))
    if "paper_shape" in sections:
        guarded(results, "paper_shape", budget, 60, lambda: scale_paper_shape(
            device, workdir, PAPER_SHAPE_4_LAYERS if big else TINY_SCALE_SHAPE, 8192 if big else 256))
    if "prefill" in sections:
        guarded(results, "prefill", budget, 30, lambda: scale_prefill(model_dir, device, 10, 40, 96 if big else 16))
    save()
    gpu_gib = env.get("gpu_gib") or 24
    chosen = args.cases.split(",")
    order = [c for c in cases(model_dir, args.tiny, device) if c[0] in chosen]
    first, rest = order[:3], order[3:]  # PPO (sync and overlapped) and GRPO, then the GPU tests, then the rest
    for group in (first, None, rest):
        if group is None:
            if not args.no_tests:
                guarded(results, "tests", budget, 40, lambda: run_pytest(max(budget.left() - 5, 30)))
                save()
            continue
        for name, text, extra_env in group:
            guarded(results, f"train:{name}", budget, 60 if args.tiny else 75, lambda n=name, t=text, e=extra_env:
                    train_case(n, t, gpu_gib, max(budget.left() - 5, 30), workdir, e))
            save()
    results["total_s"] = round(time.monotonic() - budget.t0, 1)
    save()
    print("\n" + table(results), flush=True)
    print(f"[gpu_check] wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
