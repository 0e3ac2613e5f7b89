"""New for issue 33: checks that need a CUDA GPU (`make test-gpu`, `pytest -m gpu`; skipped without CUDA).

A random Qwen2 of a small shape (built on the GPU from a config, the testkit tokenizer) trained in bf16:
one step per algorithm, the overlapped step, ZeRO-2 under the DeepSpeed launcher, the weight stream into the
CUDA sampling copy, the plan against the measured peak memory, and the decode speed of both transformers-engine
paths next to the bandwidth floor (printed; no wall time is asserted). benchmarks/gpu_check.py runs the same
measurements on Qwen2.5-1.5B's shape.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.engines.decode_floor import decode
from benchmarks.gpu_check import Budget, build_model, environment, train_case

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parent.parent
SMALL = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=8, num_attention_heads=8,
             num_key_value_heads=2)  # ~0.12 B parameters: fixed CUDA overheads stay small beside the plan


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    return build_model(tmp_path_factory.mktemp("gpu_model") / "qwen2-small", SMALL, "cuda")


def _config_text(model: Path, **changes) -> str:
    base = {"model": str(model), "persona_set": "builtin:train",
            "simulator": "python:docs/examples/rule_user.py:make_user",
            "max_turns": 2, "max_new_tokens": 32, "max_dialogue_tokens": 512, "temperature": 1.0, "save_every": 100,
            "keep_checkpoints": 1, "seed": 0, "rollout_backend": "transformers", "dtype": "bfloat16", "device": "cuda",
            "steps": 2, "dialogues_per_step": 8, "minibatch_size": 4, "micro_batch_size": 2, "algorithm": "grpo",
            "group_size": 4}
    base.update(changes)
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in base.items())


def test_decode_speed_next_to_the_bandwidth_floor(small_model: Path):
    """Both decode paths at batch 1 and 64; the static path replays its captured graph and agrees with generate."""
    env = environment()
    result = decode(small_model, "cuda", [1, 64], 48, 64, env, Budget(300))
    print("\n" + json.dumps(result, indent=1))
    rows = {(r["batch"], r["path"]): r for r in result["rows"] if r["path"] in ("generate", "static")}
    assert all("ms_per_step" in r for r in rows.values()), rows  # (generate_batch, the library's, is only timed)
    assert result["static_graph_captures"] >= 2  # one graph per batch bucket
    assert result["greedy_agreement"]["first_logprob_abs_diff"] < 0.1


def test_the_captured_step_samples_what_the_eager_step_samples(small_model: Path):
    """The whole decode step replayed as a CUDA graph (model, sampler, recording, end check, next inputs, from
    buffers a device-side counter indexes) gives the ids and log-probs of the same step run eagerly, sampled and
    greedy, a left-padded row included; a change of sampling recaptures."""
    import torch

    from trainer.policies.hf_engine import HFEngine
    from trainer.policies.static_decode import StaticDecoder, mix64

    engine = HFEngine(small_model, device="cuda", decode="static", keep_kv=0)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, engine.tokenizer.vocab_size, (6, 24), generator=g)
    attention = torch.ones_like(ids)
    ids[0, :5], attention[0, :5] = engine.tokenizer.pad_token_id, 0
    keys = mix64(torch.arange(6, dtype=torch.int64) * 7919 + 1)
    graphed, eager = StaticDecoder(engine.model, "cuda", True), StaticDecoder(engine.model, "cuda", False)
    with torch.inference_mode():
        for temperature in (1.0, 0.0, 1.0):
            new_g, lp_g = graphed.decode(ids, attention, 40, temperature, 1.0, keys, [-1], lambda: False)
            new_e, lp_e = eager.decode(ids, attention, 40, temperature, 1.0, keys, [-1], lambda: False)
            assert new_g.shape == new_e.shape == (6, 40)
            assert torch.equal(new_g[:, :8], new_e[:, :8]), (temperature, new_g[:, :8], new_e[:, :8])
            assert torch.allclose(lp_g[:, :8], lp_e[:, :8], atol=0.05)
    assert graphed.captures == 3 and eager.captures == 0  # sampled, greedy, sampled again


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "rloo", "reinforce_pp"])
def test_one_bf16_step_per_algorithm_moves_the_policy(small_model: Path, algorithm: str):
    from trainer.config import TrainConfig
    from trainer.learning.batch import make_batch
    from trainer.learning.learner import Learner

    cfg = TrainConfig(model=str(small_model), algorithm=algorithm, dialogues_per_step=8, group_size=4, minibatch_size=8,
                      micro_batch_size=4, dtype="bfloat16", device="cuda", actor_lr=1e-3, critic_lr=1e-3)
    learner = Learner(cfg, small_model, device="cuda")
    samples = [{"input_ids": [5 + i, 7, 9 + i, 11, 13, 15, 17], "action_mask": [0, 0, 1, 1, 1, 1, 1],
                "reward": 0.1 * i, "group_id": i // 4} for i in range(8)]
    before = {n: p.detach().clone() for n, p in learner.policy.module.named_parameters()}
    metrics = learner.update(make_batch(samples, 0))
    after = dict(learner.policy.module.named_parameters())
    assert next(iter(after.values())).device.type == "cuda" and next(iter(after.values())).dtype == torch.bfloat16
    assert any(not torch.equal(before[n], after[n]) for n in before)
    assert all(torch.isfinite(p).all() for p in after.values())
    assert all(v == v for v in metrics.values())  # no NaN in the step's metrics


def test_overlapped_steps_run_on_cuda(small_model: Path, tmp_path: Path):
    rec = train_case("overlap", _config_text(small_model, max_staleness=1, steps=3), 80, 400, tmp_path, {})
    assert rec.get("train_rc") == 0 and rec.get("status") == "succeeded", rec
    assert rec["steps"] == 3 and 0 <= rec["learner_idle_share"] <= 1


@pytest.mark.parametrize("algorithm", ["ppo", "grpo"])
def test_plan_bounds_the_measured_peak_memory(small_model: Path, tmp_path: Path, algorithm: str):
    """allocated <= plan <= 1.25 x reserved, measured in the training process (torch.cuda.max_memory_*)."""
    rec = train_case(algorithm, _config_text(small_model, algorithm=algorithm), 80, 400, tmp_path, {})
    assert rec.get("train_rc") == 0, rec
    print(f"\n{algorithm}: plan {rec['plan_gib']} GiB, allocated {rec['allocated_gib']}, "
          f"reserved {rec['reserved_gib']}")
    assert rec["plan_ge_allocated"] and rec["plan_le_slack_reserved"], rec


@pytest.mark.parametrize("lora", [False, True])
def test_weight_stream_reaches_the_cuda_sampling_copy(small_model: Path, lora: bool):
    from trainer.config import TrainConfig
    from trainer.learning.batch import make_batch
    from trainer.learning.learner import Learner
    from trainer.policies.hf_engine import HFEngine

    cfg = TrainConfig(model=str(small_model), algorithm="grpo", dialogues_per_step=4, group_size=4, minibatch_size=4,
                      micro_batch_size=4, dtype="bfloat16", device="cuda", actor_lr=1e-2, lora=lora)
    learner = Learner(cfg, small_model, device="cuda")
    engine = HFEngine(small_model, device="cuda", model=copy.deepcopy(learner.merged_policy()).eval(),
                      tokenizer=learner.tokenizer)
    learner.update(make_batch([{"input_ids": [5, 7, 9 + i, 11], "action_mask": [0, 1, 1, 1], "reward": float(i),
                                "group_id": 0} for i in range(4)], 0))
    engine.load_weights(learner.stream_policy_weights(1 << 20))
    want = learner.merged_policy().state_dict()
    got = engine.model.state_dict()
    assert set(want) == set(got)
    base = {k.removeprefix("base_model.model.").replace(".base_layer.", "."): v
            for k, v in learner.policy.module.state_dict().items() if ".lora_" not in k}
    adapted = {k for k in want if lora and not torch.equal(want[k], base[k])}
    assert (len(adapted) > 0) == lora  # the update moved every LoRA-adapted projection
    assert all(torch.equal(want[k].to(got[k].dtype), got[k]) for k in want if k not in adapted)
    for k in adapted:
        # bf16 with LoRA: merge_and_unload (on merged_policy's deep copy) and the stream (module by module) both
        # add peft's get_delta_weight, a bf16 B @ A, to the base weight, but cuBLAS may reduce B @ A over the
        # rank in another order for the copy (kernels are chosen by the operands' alignment), so the delta's
        # bf16 rounding, and then the sum's, can land one bf16 step (at most 2^-7 of the value) apart:
        # |got - want| <= 2^-7 (|want| + |delta|). The full-weight case and every other tensor stay exact.
        delta = (want[k].float() - base[k].float()).abs()
        gap = (got[k].float() - want[k].float()).abs()
        assert bool((gap <= 2 ** -7 * (want[k].float().abs() + delta)).all()), (k, float(gap.max()))


def test_zero2_trains_under_the_deepspeed_launcher(small_model: Path, tmp_path: Path):
    pytest.importorskip("deepspeed")
    launcher = shutil.which("deepspeed") or str(Path(sys.executable).parent / "deepspeed")
    cfg = tmp_path / "zero2.yaml"
    cfg.write_text(_config_text(small_model, deepspeed="zero2"))
    env = dict(os.environ, RLVER_LAB_HOME=str(tmp_path / "home"))
    proc = subprocess.run([launcher, "--no_local_rank", "--num_gpus", "1", "--module", "trainer", "train", "--config",
                           str(cfg), "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    result = json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))
    assert result["status"] == "succeeded" and result["steps"] == 2
