"""New for issue 33: the transformers engine's static-cache decode path (trainer.policies.static_decode) keeps
the sampling semantics of the generate path: the same greedy replies, the same distribution, log-probs the
learner reproduces, rows independent of their batch mates. Run on CPU with the tiny model (no graphs there:
the same loop runs eagerly; tests/test_gpu.py replays the captured graph on CUDA)."""
from __future__ import annotations

import math

import pytest
import torch

from trainer.policies import SamplingConfig
from trainer.policies.hf_engine import HFEngine
from trainer.policies.static_decode import Picker, gqa_decode_attention, mix64, row_uniforms

PROMPTS = [[5, 6, 7, 8, 9, 10], [11, 12, 13], [20] * 17, [30, 31]]


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    from testkit.tiny_model import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("tiny_static"))
    plain = HFEngine(path, device="cpu", decode="generate")
    static = HFEngine(path, device="cpu", decode="static", model=plain.model, tokenizer=plain.tokenizer)
    return plain, static


def test_auto_decode_is_generate_on_cpu_and_a_bad_choice_names_the_setting(engines, monkeypatch):
    plain, _ = engines
    assert HFEngine(plain.path, device="cpu", model=plain.model, tokenizer=plain.tokenizer).decode_path == "generate"
    monkeypatch.setenv("RLVER_HF_DECODE", "static")
    assert HFEngine(plain.path, device="cpu", model=plain.model, tokenizer=plain.tokenizer).decode_path == "static"
    with pytest.raises(ValueError, match="decode: must be one of generate, static"):
        HFEngine(plain.path, device="cpu", model=plain.model, tokenizer=plain.tokenizer, decode="fast")


def test_greedy_replies_and_logprobs_equal_the_generate_path(engines):
    plain, static = engines
    params = SamplingConfig(temperature=0, max_new_tokens=24)
    for a, b in zip(plain.generate_ids(PROMPTS, params), static.generate_ids(PROMPTS, params)):
        assert a.token_ids == b.token_ids and a.finish_reason == b.finish_reason
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_a_prefill_in_groups_of_rows_gives_the_same_replies(engines, monkeypatch):
    """A batch whose prompt would pass PREFILL_TOKENS at once is prefilled a group of rows at a time (each
    group's cache copied into the static cache): the replies are those of the generate path."""
    import trainer.policies.static_decode as static_decode

    plain, _ = engines
    grouped = HFEngine(plain.path, device="cpu", decode="static", model=plain.model, tokenizer=plain.tokenizer,
                       keep_kv=0)
    monkeypatch.setattr(static_decode, "PREFILL_TOKENS", 40)  # width 17: groups of 2 rows
    calls = []
    hook = plain.model.register_forward_pre_hook(lambda m, a, kw: calls.append(kw["input_ids"].shape), with_kwargs=True)
    params = SamplingConfig(temperature=0, max_new_tokens=12)
    try:
        got = grouped.generate_ids(PROMPTS, params)
    finally:
        hook.remove()
    assert calls[:3] == [torch.Size([2, 17]), torch.Size([2, 17]), torch.Size([4, 1])]  # two groups, then decode
    for a, b in zip(plain.generate_ids(PROMPTS, params), got):
        assert a.token_ids == b.token_ids and a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


def test_seeded_rows_do_not_depend_on_their_batch_mates(engines):
    _, static = engines
    params = SamplingConfig(temperature=1.0, max_new_tokens=20)
    together = static.generate_ids(PROMPTS, params, seeds=[1, 2, 3, 4])
    alone = static.generate_ids([PROMPTS[2]], params, seeds=[3])[0]
    assert together[2].token_ids == alone.token_ids
    assert together[2].logprobs == pytest.approx(alone.logprobs, abs=1e-4)
    again = static.generate_ids(PROMPTS, params, seeds=[1, 2, 3, 4])
    assert [g.token_ids for g in again] == [g.token_ids for g in together]
    other = static.generate_ids(PROMPTS, params, seeds=[9, 8, 7, 6])
    assert [g.token_ids for g in other] != [g.token_ids for g in together]


def test_logprobs_are_what_the_learner_recomputes(engines):
    """log p(token) = log_softmax(logits / T) at the token's position, under the full forward of prompt + reply."""
    _, static = engines
    temperature = 0.7
    gens = static.generate_ids(PROMPTS[:2], SamplingConfig(temperature=temperature, max_new_tokens=16), seeds=[5, 6])
    for prompt, gen in zip(PROMPTS[:2], gens):
        ids = torch.tensor([prompt + gen.token_ids])
        with torch.no_grad():
            logits = static.model(input_ids=ids).logits[0, len(prompt) - 1:-1].float() / temperature
        expected = torch.log_softmax(logits, -1).gather(-1, torch.tensor(gen.token_ids)[:, None])[:, 0]
        assert gen.logprobs == pytest.approx(expected.tolist(), abs=1e-4)


def test_replies_end_at_the_first_stop_id(engines):
    _, static = engines
    gens = static.generate_ids(PROMPTS, SamplingConfig(temperature=1.5, max_new_tokens=64), seeds=list(range(4)))
    stops = set(static._stop_ids)
    for g in gens:
        assert not stops & set(g.token_ids[:-1])
        assert (g.finish_reason == "stop") == (g.token_ids[-1] in stops)
        assert len(g.token_ids) == len(g.logprobs) <= 64


def test_gumbel_sampler_draws_from_softmax_over_the_nucleus():
    """10,000 rows with their own keys sample one step from the same logits: the frequencies follow
    softmax(logits / T) renormalised over the top-p nucleus; nothing outside the nucleus is drawn."""
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])
    rows = 10_000
    keys = mix64(torch.arange(rows, dtype=torch.int64) * 7919 + 13)
    for temperature, top_p in ((1.0, 1.0), (0.8, 0.9)):
        chosen, logp = Picker(temperature, top_p, keys)(logits.expand(rows, -1).clone(), step=3)
        probs = torch.softmax(logits / temperature, -1)
        order = probs.argsort(descending=True)
        keep = torch.zeros_like(probs, dtype=torch.bool)
        keep[order[(probs[order].cumsum(0) - probs[order]) < top_p]] = True
        probs = torch.where(keep, probs, 0.0) / probs[keep].sum()
        counts = torch.bincount(chosen, minlength=len(logits)).double()
        assert counts[~keep].sum() == 0
        chi2 = (((counts - rows * probs) ** 2) / (rows * probs).clamp(min=1e-9))[keep].sum().item()
        assert chi2 < 25.0  # 5 degrees of freedom: p < 1e-4 for a fair sampler
        assert torch.allclose(logp, probs[chosen].log().float(), atol=1e-5)


def test_row_uniforms_are_uniform_and_differ_by_row_and_step():
    keys = mix64(torch.tensor([1, 2], dtype=torch.int64))
    u = row_uniforms(keys, 0, 50_000)
    assert 0 < u.min() and u.max() < 1 and abs(u.mean().item() - 0.5) < 0.01
    assert abs(u.var().item() - 1 / 12) < 0.002
    assert not torch.equal(u[0], u[1]) and not torch.equal(u, row_uniforms(keys, 1, 50_000))
    assert torch.equal(row_uniforms(keys, torch.tensor([7])[0], 50_000), row_uniforms(keys, 7, 50_000))  # device step


def test_grouped_decode_attention_equals_sdpa_with_repeated_heads():
    g = torch.Generator().manual_seed(0)
    b, heads, kv_heads, length, dim = 3, 6, 2, 10, 8
    q = torch.randn(b, heads, 1, dim, generator=g)
    k, v = torch.randn(b, kv_heads, length, dim, generator=g), torch.randn(b, kv_heads, length, dim, generator=g)
    mask = torch.rand(b, 1, 1, length, generator=g) > 0.3
    mask[..., 0] = True
    out, _ = gqa_decode_attention(None, q, k, v, mask, scaling=1 / math.sqrt(dim))
    rep = heads // kv_heads
    ref = torch.nn.functional.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                                           attn_mask=mask)
    assert torch.allclose(out, ref.transpose(1, 2), atol=1e-5)
