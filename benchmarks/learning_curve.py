"""Learning curve: GRPO on SmolLM2-135M-Instruct vs the offline simulator, held-out personas before/after.

    python benchmarks/learning_curve.py [--minutes 60] [--eval-every 10] [--threads 2] [--lr 5e-4] [--arms A,B] ...

Trains on the built-in personas of the train split (extra["split"] == "train") with the training
simulator preset ("rlver-hard", formerly "training": start 30, unclamped changes) for a wall-clock budget
of training time (--minutes; the held-out evaluations are timed separately and not counted). The held-out personas (split
"heldout", one per hidden-need category) are scored before training, every --eval-every minutes of
training, and after, always with the same seeds, under the evaluation rules (--eval-preset, default
"standard": start 40, changes clamped to +-10). Target: +15 points of mean final emotion on the held-out
personas within 60 minutes on 2 CPU cores. --stop-at-gain ends training at the first evaluation that
reaches the given gain (the reported "after" is then that evaluation; a threshold crossed by a noisy
evaluation overstates the gain a little, so the per-evaluation curve is printed too).
Before and after, the held-out personas are also scored over --protocol-turns policy turns (default 10, the
Sentient benchmark's cap; the same seeds), with the mean emotion change of every turn: the 3-turn curve is
cheap enough to repeat during training, the 10-turn score shows whether the policy holds up over a whole
conversation (a policy that repeats itself loses points turn after turn).
The offline simulator is a development environment: its scores are not Sentient-benchmark scores.
--simulator picks its scorer: `offline` (v3, the default: with the SmolLM2 coherence judgement) or
`offline:v2`; the first figures below are offline-v3's, the rest offline-v2's (add `--simulator offline:v2`).

Deviations from the paper (RLVER trains Qwen2.5-7B, full fine-tune, lr 1e-6, 8 turns, temperature 1.0),
all for a 2-core CPU budget and printed by the script: a 135M model; LoRA r=16 on every linear layer with
lr 5e-4; ONE policy turn per training dialogue (the persona's opening line and one reply: 32 replies per
step in ~41-46 s, where 3-turn dialogues gave 8-16 per ~70 s); 4 optimizer steps per rollout (mini-batches of
8 dialogues, PPO-clipped); sampling at 0.7 (SmolLM2 at 1.0 writes mostly incoherent text); at most 48
new tokens; the held-out score after 3 turns instead of the protocol's 10. The reward is the paper's,
max(final emotion / 100, 0), with no shaping, and the simulator's scoring is untouched.
configs/learning-curve-cpu.yaml is the same training as a job (`python -m trainer train --config ...`).

Threads: on a loaded 2-core machine one torch thread is much faster than two (a SmolLM2 forward pass
measured 0.87 s with 2 threads vs 0.02 s with 1 while the other core was busy); --threads sets it.

Measured figures, with the commands that reproduce them, and the settings tried before these defaults:
docs/results.md ("Learning").
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PAPER = {"model": "Qwen2.5-7B-Instruct", "lr": 1e-6, "lora": False, "max_turns": 8, "eval_turns": 10,
         "temperature": 1.0}


def evaluate(trainer, profiles, args, turns: int = 0, flags: bool = True) -> dict:
    """Final emotions of the held-out personas (args.eval_samples dialogues each, fixed seeds) after `turns`
    policy turns (default args.eval_turns); `flags`: also the detectors' shares (a coherence judgement a reply)."""
    turns = turns or args.eval_turns
    from simulator.user.spec import SimulatorSpec
    from trainer.rollout.dialogue_rollout import DialogueRollout, RolloutConfig

    t0 = time.monotonic()
    points: dict[str, list[float]] = {}  # offline-scorer component -> its points on every held-out reply
    fired: list[set[str]] = []  # per judged reply, the offline components that scored it

    def collect(ev) -> None:
        comps = (ev.turn or {}).get("inner", {}).get("components", {}) if ev.kind == "turn" else {}
        for name, c in comps.items():
            points.setdefault(name, []).append(c["points"])
        if comps:
            fired.append(set(comps))

    held_out_user = SimulatorSpec(args.simulator, rules=args.eval_preset, calibration=args.calibration)
    rollout = DialogueRollout(trainer.policy_engine, held_out_user.factory(),
                            config=RolloutConfig(mode=args.mode, max_turns=turns,
                                                 max_new_tokens=args.max_new_tokens, max_tokens=args.max_tokens,
                                                 temperature=args.eval_temperature, seed=12345,
                                                 source="benchmark"), on_event=collect)
    samples = rollout.run(profiles, args.eval_samples)
    n_replies = max(1, sum(s.n_turns for s in samples))
    finals = [s.final_emotion for s in samples if s.final_emotion is not None]
    per = {p.id: [s.final_emotion for s in samples if s.profile_id == p.id and s.final_emotion is not None]
           for p in profiles}
    return {"mean": statistics.fmean(finals) if finals else float("nan"), "n": len(finals),
            "sd": statistics.stdev(finals) if len(finals) > 1 else 0.0,
            "per": {k: statistics.fmean(v) if v else float("nan") for k, v in per.items()},
            "success": sum(s.outcome == "success" for s in samples),
            "failure": sum(s.outcome == "failure" for s in samples), "seconds": time.monotonic() - t0,
            "per_turn": [statistics.fmean(d) if d else float("nan") for d in
                         ([s.emotions[i + 1] - s.emotions[i] for s in samples if len(s.emotions) > i + 1]
                          for i in range(turns))],
            "example": next((s.messages[1]["content"] for s in samples if len(s.messages) > 1), ""),
            # mean points per reply (0 where a component did not apply), so the components add up to the change
            "components": {k: sum(v) / n_replies for k, v in points.items()},
            "finals": [s.final_emotion for s in samples], "flags": detector_shares(samples, fired) if flags else {}}


# The probe detectors: offline components that fire on the behaviours `python -m simulator probe` plays.
PROBE_DETECTORS = ("empty", "garbled", "repetition", "length", "questions", "goodbye", "need_mismatch", "dismissal")


def detector_shares(samples, fired: list[set[str]]) -> dict[str, float]:
    """Share of the policy's replies each detector flags. Coherence and parroting are computed on every reply
    with the v3 judge and the parroting measure whatever the scorer (so v2 runs get the same figures); the
    probe detectors are read from the components the simulator gave the judged replies."""
    from simulator.user.backends.coherence import coherence_sync, judge_coherence
    from simulator.user.backends.offline import PARROT_THRESHOLD, parroted_share

    pairs, parrots = [], []
    for s in samples:
        said: list[str] = []
        for m in s.messages:
            if m["role"] == "user":
                said.append(m["content"])
            elif m["role"] == "assistant" and said:
                pairs.append((said[-1], m["content"].strip()))
                parrots.append(parroted_share(m["content"], said) > PARROT_THRESHOLD)
    verdicts = [judge_coherence(f, a) for f, a in coherence_sync(pairs)] if pairs else []
    n, k = max(1, len(pairs)), max(1, len(fired))
    out = {"replies": float(len(pairs)),
           "incoherent (gate < 1)": sum(v.gate < 1 for v in verdicts) / n,
           "incoherent (gate 0)": sum(v.gate <= 0 for v in verdicts) / n,
           "parroting": sum(parrots) / n}
    for name in PROBE_DETECTORS:
        out[f"probe: {name}"] = sum(name in f for f in fired) / k
    out["probe: any"] = sum(bool(f & set(PROBE_DETECTORS)) for f in fired) / k
    return out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=60.0, help="training wall-clock budget (evaluations excluded)")
    p.add_argument("--eval-every", type=float, default=10.0, help="minutes of training between held-out scores")
    p.add_argument("--stop-at-gain", type=float, default=0.0, help="stop once held-out gains this much (0: never)")
    p.add_argument("--model", default="default")
    p.add_argument("--mode", default="direct", choices=("direct", "think"))
    p.add_argument("--profiles-per-step", type=int, default=8)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-turns", type=int, default=1, help="policy turns per training dialogue")
    p.add_argument("--eval-turns", type=int, default=3, help="policy turns per held-out dialogue")
    p.add_argument("--eval-samples", type=int, default=4, help="dialogues per held-out persona")
    p.add_argument("--protocol-turns", type=int, default=10,
                   help="also score the held-out personas before and after with this many turns (the benchmark "
                        "protocol's 10; 0: skip)")
    p.add_argument("--eval-preset", default="standard")
    p.add_argument("--simulator", default="offline",
                   help="offline (scorer v3, default) or offline:v2 (the scorer of the figures measured before v3)")
    p.add_argument("--calibration", default="",
                   help="a calibration of the simulator to people, by name, in training and held out (default none)")
    p.add_argument("--temperature", type=float, default=0.7, help="sampling temperature in training")
    p.add_argument("--eval-temperature", type=float, default=None, help="held-out sampling (default: --temperature)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--max-tokens", type=int, default=2048, help="tokens per dialogue")
    p.add_argument("--lr", type=float, default=5e-4, help="actor learning rate (paper: 1e-6 at 7B, full)")
    p.add_argument("--lora", action=argparse.BooleanOptionalAction, default=True,
                   help="train LoRA adapters (peft); --no-lora trains every weight")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--lora-targets", default="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
                   help="modules LoRA adapts")
    p.add_argument("--epochs", type=int, default=1, help="passes over each batch (ppo_epochs)")
    p.add_argument("--minibatch", type=int, default=8,
                   help="dialogues per optimizer step (0: the whole batch, one optimizer step per rollout)")
    p.add_argument("--entropy-coef", type=float, default=0.001)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-staleness", type=int, default=0,
                   help="overlapped training (docs/training-overlap.md): the next steps' dialogues run during the "
                        "update, trained at most this many updates behind (0: on-policy, the paper)")
    p.add_argument("--steps", type=int, default=0,
                   help="stop after this many steps (0: only the --minutes budget), to compare runs step for step")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--arms", default="", help="comma-separated arms of trainer.experiments.arms (final_emotion, "
                   "emotion_deltas, turn_grpo, turn_gae): each trained from the same start for the same budget, "
                   "then scored over --protocol-turns on builtin:heldout and builtin:adversarial; one table")
    args = p.parse_args()
    if args.eval_temperature is None:
        args.eval_temperature = args.temperature
    return args


def settings_lines(args, cfg, base_model: str) -> list[str]:
    import torch

    rows = [("model", Path(base_model).name, PAPER["model"]),
            ("training", f"LoRA r={cfg.lora_r} on {','.join(cfg.lora_target_modules)}" if cfg.lora else "full",
             "full"),
            ("actor lr", f"{cfg.actor_lr:g}", f"{PAPER['lr']:g}"),
            ("dialogues / step", f"{cfg.dialogues_per_step} ({cfg.profiles_per_step} profiles x {cfg.group_size})",
             "paper batch"),
            ("policy turns (train / held-out)", f"{cfg.max_turns} / {args.eval_turns}",
             f"{PAPER['max_turns']} / {PAPER['eval_turns']}"),
            ("max new tokens / turn", str(cfg.max_new_tokens), "long"),
            ("temperature (train / held-out)", f"{cfg.temperature:g} / {args.eval_temperature:g}", "1"),
            ("passes x optimizer steps per batch",
             f"{cfg.ppo_epochs} x {cfg.dialogues_per_step // cfg.minibatch_size}", "1 x mini-batches"),
            ("entropy bonus", f"{cfg.entropy_coef:g}", "-"),
            ("simulator rules (train / held-out)", f"{cfg.simulator_preset} / {args.eval_preset}",
             "not settled / standard"),
            ("simulator calibration", cfg.calibration or "none", "none"),
            ("reward", "each arm's (the arms table)" if args.arms else "max(final / 100, 0), no shaping", "same"),
            ("max staleness (overlap)", f"{cfg.max_staleness} ({cfg.off_policy_estimator})" if cfg.max_staleness
             else "0 (on-policy)", "0"),
            ("torch threads", str(torch.get_num_threads()), "-")]
    return ["| setting | this run | paper |", "|---|---|---|"] + [f"| {a} | {b} | {c} |" for a, b, c in rows]


def base_config(args):
    """The training config of the run (every arm's base)."""
    from trainer.config import TrainConfig

    n = args.profiles_per_step * args.group
    minibatch = args.minibatch or n
    return TrainConfig(model=args.model, algorithm="grpo", mode=args.mode, persona_set="builtin:train",
                       simulator=args.simulator, calibration=args.calibration, simulator_preset="rlver-hard",
                       group_size=args.group,
                       dialogues_per_step=n, minibatch_size=minibatch, micro_batch_size=min(minibatch, 4),
                       steps=100_000, actor_lr=args.lr, max_turns=args.max_turns, max_new_tokens=args.max_new_tokens,
                       max_dialogue_tokens=args.max_tokens, temperature=args.temperature, lora=args.lora,
                       lora_r=args.lora_r, lora_alpha=2 * args.lora_r, lora_target_modules=args.lora_targets.split(","),
                       entropy_coef=args.entropy_coef, ppo_epochs=args.epochs, max_staleness=args.max_staleness,
                       seed=args.seed, store_dialogues=False, save_every=0, output_dir=tempfile.mkdtemp(prefix="lc-"))


def main() -> None:
    args = parse_args()
    import torch

    from simulator.personas.builtin import BUILTIN_PROFILES
    from trainer.learning.rl_trainer import RLTrainer

    if args.threads:
        torch.set_num_threads(args.threads)
    heldout = [q for q in BUILTIN_PROFILES if q.extra.get("split") == "heldout"]
    if args.arms:
        return run_arms(args, heldout)
    trainer = RLTrainer(base_config(args))
    print("\n".join(settings_lines(args, trainer.config, str(trainer.base_model))), flush=True)
    before = evaluate(trainer, heldout, args)
    print(f"held-out before: {before['mean']:.1f} (sd {before['sd']:.1f}) over {before['n']} dialogues "
          f"({before['seconds']:.0f} s); e.g. {before['example'][:160]!r}", flush=True)
    long_before = evaluate(trainer, heldout, args, args.protocol_turns) if args.protocol_turns else None
    if long_before:
        print(f"held-out before, {args.protocol_turns} turns: {long_before['mean']:.1f} ({long_before['seconds']:.0f} s)",
              flush=True)
    curve, step, train_s, after = train_for(trainer, args, heldout, before)
    trainer._stop_overlap()  # overlapped training: the dialogues of steps not trained stop here
    long_after = evaluate(trainer, heldout, args, args.protocol_turns) if args.protocol_turns else None
    report(args, trainer, heldout, before, after, curve, step, train_s, trainer.config.dialogues_per_step)
    if long_before and long_after:
        report_protocol(args, long_before, long_after)


def train_for(trainer, args, heldout, before: dict, flags: bool = True) -> tuple[list, int, float, dict]:
    """Train for --minutes of training time (or --steps), scoring the held-out personas every --eval-every
    minutes; (curve [(step, minutes, mean)], steps, training seconds, the last evaluation)."""
    curve = [(0, 0.0, before["mean"])]
    print("| step | train min | train reward | reward sd | train final emotion | entropy | grad norm | rollout s | update s |")
    print("|-----:|----------:|-------------:|----------:|--------------------:|--------:|----------:|----------:|---------:|")
    train_s, step, next_eval, after = 0.0, 0, args.eval_every * 60, before
    while train_s < args.minutes * 60 and not (args.steps and step >= args.steps):
        step += 1
        t0 = time.monotonic()
        m = trainer.train_step(step)
        train_s += time.monotonic() - t0
        print(f"| {step:4d} | {train_s / 60:9.1f} | {m['reward_mean']:12.3f} | {m.get('reward_std', float('nan')):9.3f} | "
              f"{m.get('final_emotion_mean', float('nan')):19.1f} | {m['entropy']:7.3f} | "
              f"{m.get('grad_norm', float('nan')):9.3f} | {m['rollout_s']:9.0f} | {m['update_s']:8.0f} |", flush=True)
        if train_s >= next_eval or train_s >= args.minutes * 60 or step == args.steps:
            next_eval += args.eval_every * 60
            after = evaluate(trainer, heldout, args, flags=flags)
            curve.append((step, train_s / 60, after["mean"]))
            print(f"held-out after {step} steps, {train_s / 60:.1f} training min: {after['mean']:.1f} "
                  f"({after['mean'] - before['mean']:+.1f}; {after['seconds']:.0f} s); "
                  f"e.g. {after['example'][:160]!r}", flush=True)
            if args.stop_at_gain and after["mean"] - before["mean"] >= args.stop_at_gain:
                break
    return curve, step, train_s, after


def run_arms(args, heldout) -> None:
    """--arms: each arm from the same start and seed for the same budget, then the arms table (docs/results.md)."""
    from simulator.personas.specs import resolve_personas
    from trainer.config import ConfigError
    from trainer.experiments.arms import arm_config, arm_settings, arms_table, parse_arms
    from trainer.learning.rl_trainer import RLTrainer

    try:
        names = parse_arms(args.arms)
    except ConfigError as exc:
        raise SystemExit(f"--arms: {exc.errors['arms']}") from None
    sets = {"heldout": heldout, "adversarial": resolve_personas("builtin:adversarial")}
    turns, rows, before, start = args.protocol_turns or 10, [], None, None
    for name in names:
        trainer = RLTrainer(arm_config(base_config(args), name))
        if before is None:  # every arm starts from these weights: scored once
            print("\n".join(settings_lines(args, trainer.config, str(trainer.base_model))), flush=True)
            before = {k: evaluate(trainer, v, args, turns, flags=False)["finals"] for k, v in sets.items()}
            start = evaluate(trainer, heldout, args, flags=False)
        print(f"\narm {name}: {arm_settings(name)}", flush=True)
        _, step, train_s, _ = train_for(trainer, args, heldout, start, flags=False)
        trainer._stop_overlap()
        rows.append({"arm": name, "steps": step, "minutes": train_s / 60,
                     **{k: evaluate(trainer, v, args, turns, flags=False)["finals"] for k, v in sets.items()}})
        del trainer  # one model in memory at a time
        gc.collect()
    budget = f"{args.minutes:g} min" + (f" or {args.steps} steps" if args.steps else "")
    print(f"\nArms over {turns} turns ('{args.eval_preset}' rules, the same seeds), each trained {budget} from one "
          "start:\n" + "\n".join(arms_table(rows, before)), flush=True)


def change_interval(before: dict, after: dict, n_boot: int = 2000, seed: int = 0) -> str:
    """The mean change with a 95% interval from resampling the held-out personas (each persona's change paired:
    the same seeds before and after)."""
    import numpy as np

    changes = np.array([after["per"][k] - before["per"][k] for k in before["per"]
                        if not (math.isnan(before["per"][k]) or math.isnan(after["per"].get(k, math.nan)))])
    if len(changes) < 2:
        return f"{after['mean'] - before['mean']:+.1f} points"
    boot = np.random.default_rng(seed).choice(changes, size=(n_boot, len(changes))).mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return (f"{after['mean'] - before['mean']:+.1f} points [{low:+.1f}, {high:+.1f}] (95% interval over the "
            f"{len(changes)} held-out personas' paired changes)")


def report_protocol(args, before: dict, after: dict) -> None:
    """The same held-out personas and seeds over the benchmark protocol's turn count."""
    print()
    print(f"Held-out over {args.protocol_turns} turns (--protocol-turns; the Sentient benchmark allows up to 10), same personas and seeds:")
    print("| | mean final emotion (sd) | success / failure | mean change per turn, turn 1..N |")
    print("|---|---:|---:|---|")
    for name, r in (("before", before), ("after", after)):
        print(f"| {name} | {r['mean']:.1f} ({r['sd']:.1f}) | {r['success']} / {r['failure']} | "
              + " ".join("-" if math.isnan(x) else f"{x:+.1f}" for x in r["per_turn"]) + " |")
    print("('-': a turn no dialogue reached with a judgement; under the benchmark protocol the reply at the turn cap "
          "is not judged)")
    print(f"change over {args.protocol_turns} turns: {change_interval(before, after)}")
    report_flags(f"{args.protocol_turns} turns", before, after)


def report_flags(label: str, before: dict, after: dict) -> None:
    """Share of the held-out replies each detector flags, before and after training."""
    print()
    print(f"Held-out replies flagged ({label}; {before['flags']['replies']:.0f} replies before, "
          f"{after['flags']['replies']:.0f} after):")
    print("| detector | before | after |")
    print("|---|---:|---:|")
    for k in before["flags"]:
        if k != "replies":
            print(f"| {k} | {before['flags'][k]:.1%} | {after['flags'].get(k, 0.0):.1%} |")


def report(args, trainer, heldout, before, after, curve, step, train_s, n) -> None:
    print()
    print(f"GRPO, {Path(str(trainer.base_model)).name}, simulator {args.simulator}"
          f"{' calibrated ' + args.calibration if args.calibration else ''}; {step} steps of {n} dialogues in "
          f"{train_s / 60:.1f} training min (budget {args.minutes:g}); held-out: {len(heldout)} personas x "
          f"{args.eval_samples}, {args.eval_turns} turns, '{args.eval_preset}' rules, "
          f"temperature {args.eval_temperature:g}")
    print("| step | training min | held-out mean final emotion | change |")
    print("|-----:|-------------:|----------------------------:|-------:|")
    for s, minutes, mean in curve:
        print(f"| {s:4d} | {minutes:12.1f} | {mean:27.1f} | {mean - before['mean']:+6.1f} |")
    print()
    print("| held-out persona | need | before | after |")
    print("|------------------|------|-------:|------:|")
    for p in heldout:
        print(f"| {p.id} | {p.need_category} | {before['per'][p.id]:6.1f} | {after['per'][p.id]:5.1f} |")
    print(f"| mean (sd) | | {before['mean']:.1f} ({before['sd']:.1f}) | {after['mean']:.1f} ({after['sd']:.1f}) |")
    print(f"| success / failure | | {before['success']} / {before['failure']} | {after['success']} / {after['failure']} |")
    print()
    print("What moved (offline scorer, mean points per held-out reply):")
    print("| component | before | after | change |")
    print("|-----------|-------:|------:|-------:|")
    for k in sorted(set(before["components"]) | set(after["components"])):
        b, a = before["components"].get(k, 0.0), after["components"].get(k, 0.0)
        print(f"| {k} | {b:+.2f} | {a:+.2f} | {a - b:+.2f} |")
    print(f"e.g. before: {before['example'][:200]!r}")
    print(f"e.g. after:  {after['example'][:200]!r}")
    print(f"change: {change_interval(before, after)} (target +15 within 60 minutes)")
    report_flags(f"{args.eval_turns} turns", before, after)


if __name__ == "__main__":
    main()
