"""The vLLM engine for real (vllm-cpu on CPU machines) with the tiny model: sampling, log-probs that
training can reproduce, per-request seeds, pushing new weights, and a rollout on top of it.

vLLM runs in a child process: it sets up torch.distributed and lowers torch's thread count in the
process that creates it, which must not leak into the other tests of the session.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.process, pytest.mark.slow]

_CHECKS = r'''
import json, sys
import torch


def hf_logprobs(model, prompt, sampled):
    with torch.inference_mode():
        logits = model(torch.tensor([prompt + sampled])).logits[0, len(prompt) - 1:-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(sampled)[:, None])[:, 0]


def gap(gen, model):
    return (torch.tensor(gen.logprobs) - hf_logprobs(model, gen.prompt_ids, gen.token_ids)).abs().max().item()


def main(tiny, other_dir):
    from transformers import AutoModelForCausalLM
    from tests.scripted_rollout import Factory, profile
    from trainer.policies import SamplingConfig, make_policy_engine
    from trainer.rollout.dialogue_rollout import RolloutConfig, DialogueRollout
    from testkit.tiny_model import build_tiny_model

    out = {}
    engine = make_policy_engine(f"vllm:{tiny}", dtype="float32", max_model_len=1024)
    hf = AutoModelForCausalLM.from_pretrained(tiny)
    chats = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "I failed the exam today."}]]
    gens = engine.generate(chats, SamplingConfig(max_new_tokens=8, seed=3))
    out["prompt_ids_ok"] = all(g.prompt_ids == engine.encode_chat(c) for c, g in zip(chats, gens))
    out["prefix_caching"] = engine.llm.llm_engine.vllm_config.cache_config.enable_prefix_caching
    out["lengths"] = [(len(g.token_ids), len(g.logprobs)) for g in gens]
    out["finish"] = [g.finish_reason for g in gens]
    out["gap"] = max(gap(g, hf) for g in gens)
    same = engine.generate(chats[:1] * 4, SamplingConfig(max_new_tokens=8, seed=3))
    out["distinct_in_group"] = len({tuple(g.token_ids) for g in same})

    other = AutoModelForCausalLM.from_pretrained(build_tiny_model(other_dir, seed=7))
    engine.load_weights(other.state_dict())
    [g] = engine.generate(chats[:1], SamplingConfig(max_new_tokens=6, seed=1))
    out["gap_after_load"] = gap(g, other)
    out["gap_to_old_weights"] = gap(g, hf)

    # the same push as a stream: one bucket per layer (a 1-byte budget), each moved when the reload reaches it
    from trainer.policies.weight_stream import bucketed
    engine.load_weights(bucketed(hf.state_dict().items(), bucket_bytes=1))
    [g] = engine.generate(chats[:1], SamplingConfig(max_new_tokens=6, seed=1))
    out["stream_gap_back"], out["stream_gap_to_other"] = gap(g, hf), gap(g, other)
    engine.load_weights(bucketed(other.state_dict().items(), bucket_bytes=1))

    samples = DialogueRollout(engine, Factory({"ann": 2, "bob": 3}), config=RolloutConfig(max_new_tokens=6)).run(
        [profile("ann"), profile("bob")])
    out["turns"] = [s.n_turns for s in samples]
    out["segments"] = [len(s.segments) for s in samples]
    worst = 0.0
    for s in samples:
        for ids, mask, old in s.rows():
            pos = [i for i, m in enumerate(mask) if m]
            new = hf_logprobs(other, ids[:1], ids[1:])
            worst = max(worst, (new[[p - 1 for p in pos]] - torch.tensor([old[p] for p in pos])).abs().max().item())
    out["rollout_gap"] = worst
    engine.close()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
'''


def test_vllm_engine_end_to_end(tiny_model_dir, tmp_path):
    pytest.importorskip("vllm")
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    script = tmp_path / "vllm_checks.py"
    script.write_text(_CHECKS)
    proc = subprocess.run([sys.executable, str(script), str(tiny_model_dir), str(tmp_path / "other")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-3000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["prompt_ids_ok"]
    assert out["prefix_caching"] is True  # a dialogue's next turn reuses the KV of the dialogue so far
    assert all(1 <= n == m <= 8 for n, m in out["lengths"])
    assert set(out["finish"]) <= {"stop", "length"}
    assert out["gap"] < 1e-3  # vLLM's log-probs are what training recomputes
    assert out["distinct_in_group"] > 1  # one seed per request: a group does not collapse
    assert out["gap_after_load"] < 1e-3 < out["gap_to_old_weights"]  # the new weights are in use
    assert out["stream_gap_back"] < 1e-3 < out["stream_gap_to_other"]  # a layer-by-layer stream loads them all
    assert out["turns"] == [2, 3] and out["segments"] == [1, 1]
    assert out["rollout_gap"] < 1e-3
