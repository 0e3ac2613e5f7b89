"""Does the plan's time per step match a real step? The plan of a preset (its probe, trainer.plan_probe),
then real steps of the same config in a fresh process-local trainer, the last one timed.

    flock /tmp/rlver-heavy.lock .venv/bin/python benchmarks/plan_time_check.py [--preset cpu-demo] [--steps 2] [--json]

Prints the plan's seconds_per_step, the real step's seconds, their ratio (plan / real; 1.25 and 0.8 bound
"within 25%") and the machine it ran on: cores, torch threads and the 1-minute load before and after. Run it
on an idle machine: the plan and the real step each count whatever else runs beside them, and a load that
changes between the two makes the ratio say more about the machine than about the plan.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace

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


if __name__ == "__main__":
    sys.exit(main())
