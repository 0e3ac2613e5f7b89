"""Our GRPO step vs TRL's GRPOTrainer: same model, prompts, reward, group size and token limits.

    python benchmarks/vs_trl.py [--steps 3] [--prompts 2] [--group 4] [--max-new-tokens 48] [--threads 2]

Model: SmolLM2-135M-Instruct (simulator.llm.models.default_model_dir). Prompts: single-turn chats built from the
built-in personas (the direct-mode system prompt + the persona's first line). Reward: the offline
simulator's score of the reply, max(emotion after one reply / 100, 0) under the "rlver-hard" rules. Both
trainers sample at temperature 1.0 with the same max new tokens, group size and prompts per step, with no
KL term (TRL beta=0, as in RLVER), one optimizer step per batch, and gradient checkpointing on in both
(TRL's GRPOConfig default; --no-gradient-checkpointing turns it off in both).

Each trainer runs in its own child process (so peak memory is its own): the first step is a warm-up, the
next --steps are timed; the table shows the mean step time and the peak resident memory (ru_maxrss).

Measured 2026-11-22 on the shared 2-core CPU machine (other jobs running; `--steps 3`, defaults):
ours 11.9 s/step, 3656 MB peak vs TRL 1.16.0 13.8 s/step, 4502 MB -> 0.86x time, 0.81x memory.

TRL is installed for this benchmark only (not in requirements.txt): `pip install trl==1.16.0`
(works with transformers 5.19.0; it adds datasets, pyarrow, multiprocess, xxhash).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def prompts(n: int) -> list[tuple[object, list[dict]]]:
    from simulator.personas.builtin import BUILTIN_PROFILES
    from trainer.rollout.templates import system_prompt

    chosen = [p for p in BUILTIN_PROFILES if p.first_line][:n]
    return [(p, [{"role": "system", "content": system_prompt("direct", p.language)},
                 {"role": "user", "content": p.first_line}]) for p in chosen]


def make_reward():
    """reward(profile, reply) = the offline simulator's emotion after the reply, / 100, clipped at 0."""
    from simulator.user.agent import SentientAgent
    from simulator.user.backends import make_backend
    from simulator.user.rules import get_rules

    backend, rules = make_backend("offline"), get_rules("rlver-hard")

    def reward(profile, reply: str) -> float:
        agent = SentientAgent(profile, backend, rules, seed=0)
        turn = asyncio.run(agent.respond([{"role": "user", "content": profile.first_line}], reply))
        return max((turn.emotion or 0.0) / 100.0, 0.0)

    return reward


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------------------------------------- ours
def run_ours(args: argparse.Namespace) -> dict:
    import torch

    from simulator.llm.models import default_model_dir
    from trainer.config import TrainConfig
    from trainer.learning.learner import Learner, make_batch
    from trainer.policies.base import SamplingConfig
    from trainer.policies.hf_engine import HFEngine

    model = default_model_dir()
    n = args.prompts * args.group
    cfg = TrainConfig(model=str(model), algorithm="grpo", group_size=args.group, dialogues_per_step=n,
                      minibatch_size=n, micro_batch_size=n, actor_lr=1e-6, entropy_coef=0.0,
                      gradient_checkpointing=args.gradient_checkpointing,
                      steps=args.steps + 1, max_new_tokens=args.max_new_tokens)
    torch.manual_seed(0)
    learner = Learner(cfg, model)
    engine = HFEngine(model, model=learner.generation_model(), tokenizer=learner.tokenizer)
    reward = make_reward()
    data = prompts(args.prompts)
    times, rewards = [], []
    for step in range(args.steps + 1):
        t0 = time.perf_counter()
        ids = [engine.encode_chat(msgs) for _, msgs in data for _ in range(args.group)]
        gens = engine.generate_ids(ids, SamplingConfig(1.0, 1.0, args.max_new_tokens, seed=step))
        samples = []
        for i, g in enumerate(gens):
            profile = data[i // args.group][0]
            samples.append({"input_ids": g.prompt_ids + g.token_ids,
                            "action_mask": [0] * len(g.prompt_ids) + [1] * len(g.token_ids),
                            "reward": reward(profile, g.text), "group_id": i // args.group})
        learner.update(make_batch(samples, learner.tokenizer.pad_token_id), seed=step)
        if step:
            times.append(time.perf_counter() - t0)
            rewards.append(sum(s["reward"] for s in samples) / len(samples))
    return {"step_s": sum(times) / len(times), "peak_rss_mb": peak_rss_mb(), "reward": sum(rewards) / len(rewards)}


# ----------------------------------------------------------------------------------------------- TRL
def run_trl(args: argparse.Namespace) -> dict:
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from simulator.llm.models import default_model_dir

    model = default_model_dir()
    reward = make_reward()
    data = prompts(args.prompts)
    by_line = {p.first_line: p for p, _ in data}
    n = args.prompts * args.group

    def trl_reward(prompts, completions, **_) -> list[float]:
        out = []
        for prompt, completion in zip(prompts, completions):
            profile = by_line[prompt[-1]["content"]]
            text = completion[0]["content"] if isinstance(completion, list) else completion
            out.append(reward(profile, text))
        return out

    class Timer(TrainerCallback):
        def __init__(self):
            self.times, self.t0 = [], 0.0

        def on_step_begin(self, *a, **k):
            self.t0 = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.times.append(time.perf_counter() - self.t0)

    timer = Timer()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out, per_device_train_batch_size=n, gradient_accumulation_steps=1,
            num_generations=args.group, max_completion_length=args.max_new_tokens, temperature=1.0,
            learning_rate=1e-6, beta=0.0, num_iterations=1, max_steps=args.steps + 1, logging_steps=1,
            report_to=[], use_cpu=True, bf16=False, save_strategy="no", seed=0, dataloader_num_workers=0,
            shuffle_dataset=False, gradient_checkpointing=args.gradient_checkpointing)
        dataset = Dataset.from_list([{"prompt": msgs} for _, msgs in data] * (args.steps + 2) * args.group)
        trainer = GRPOTrainer(model=str(model), reward_funcs=trl_reward, args=config, train_dataset=dataset,
                              callbacks=[timer])
        trainer.train()
        rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h][1:]
    times = timer.times[1:]
    return {"step_s": sum(times) / len(times), "peak_rss_mb": peak_rss_mb(),
            "reward": sum(rewards) / max(1, len(rewards))}


def child(which: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", which, "--steps", str(args.steps), "--prompts", str(args.prompts),
           "--group", str(args.group), "--max-new-tokens", str(args.max_new_tokens), "--threads", str(args.threads)]
    if not args.gradient_checkpointing:
        cmd.append("--no-gradient-checkpointing")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{which} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--group", type=int, default=4, help="completions per prompt (GRPO group size)")
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false",
                        help="turn gradient checkpointing off in both (on by default: TRL's GRPOConfig default)")
    parser.add_argument("--child", choices=("ours", "trl"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        print(json.dumps(run_ours(args) if args.child == "ours" else run_trl(args)))
        return
    ours, trl = child("ours", args), child("trl", args)
    print(f"GRPO step, SmolLM2-135M-Instruct, {args.prompts} prompts x group {args.group}, "
          f"max {args.max_new_tokens} new tokens, {args.threads} threads, gradient checkpointing "
          f"{'on' if args.gradient_checkpointing else 'off'}, mean of {args.steps} steps after warm-up")
    print(f"| {'trainer':<16} | {'step time (s)':>13} | {'peak RSS (MB)':>13} | {'mean reward':>11} |")
    print(f"|{'-' * 18}|{'-' * 15}|{'-' * 15}|{'-' * 13}|")
    for name, r in (("rlver-lab", ours), ("TRL GRPOTrainer", trl)):
        print(f"| {name:<16} | {r['step_s']:>13.2f} | {r['peak_rss_mb']:>13.0f} | {r['reward']:>11.3f} |")
    print(f"ratio ours/TRL: step time {ours['step_s'] / trl['step_s']:.2f}x, "
          f"peak memory {ours['peak_rss_mb'] / trl['peak_rss_mb']:.2f}x (target <= 1.0x on both)")


if __name__ == "__main__":
    main()
