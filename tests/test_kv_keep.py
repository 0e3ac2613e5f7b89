"""The transformers engine keeps a dialogue's KV cache between turns, on both decode paths (generate; the
static-cache loop, eager on CPU): the same replies as prefilling every turn in full, each token prefilled once,
and nothing reused across a weight change."""
from __future__ import annotations

import pytest
import torch

from tests.scripted_rollout import Factory, profile
from trainer.policies import SamplingConfig
from trainer.policies.hf_engine import HFEngine
from trainer.policies.kept_caches import common_prefix
from trainer.rollout.dialogue_rollout import DialogueRollout
from trainer.rollout.types import RolloutConfig


@pytest.fixture(scope="module", params=["generate", "static"])
def engines(request, tiny_model_dir):
    keeping = HFEngine(tiny_model_dir, decode=request.param)
    fresh = HFEngine(tiny_model_dir, model=keeping.model, tokenizer=keeping.tokenizer, decode=request.param, keep_kv=0)
    return keeping, fresh


def _user(turn: int, row: int, vocab: int) -> list[int]:
    g = torch.Generator().manual_seed(100 * turn + row)
    return torch.randint(3, vocab, (3 + row,), generator=g).tolist()


@pytest.mark.parametrize("temperature,seeded", [(0.0, True), (1.0, True), (0.8, False)])
def test_kept_cache_samples_what_a_full_prefill_samples(engines, temperature, seeded):
    keeping, fresh = engines
    vocab = keeping.tokenizer.vocab_size
    prompts = [_user(0, row, vocab) for row in range(3)]  # three dialogues of different lengths, one batch
    for turn in range(4):
        params = SamplingConfig(temperature=temperature, max_new_tokens=6, seed=None if seeded else 7 + turn)
        seeds = [10 * turn + row for row in range(3)] if seeded else None
        before = keeping.stats["prefill_tokens"]
        got = keeping.generate_ids(prompts, params, seeds)
        want = fresh.generate_ids(prompts, params, seeds)
        assert [g.token_ids for g in got] == [g.token_ids for g in want]
        for g, w in zip(got, want):
            assert g.logprobs == pytest.approx(w.logprobs, abs=1e-4)
        if turn:  # only the reply's tokens and the new user message ran through the model
            assert keeping.stats["prefill_tokens"] - before < sum(len(p) for p in prompts) / 2
        # the third dialogue drops its last reply from its history (as think mode drops a thought):
        # its kept cache is reused up to the first id that differs
        prompts = [p + (g.token_ids if row < 2 else [5]) + _user(turn + 1, row, vocab)
                   for row, (p, g) in enumerate(zip(prompts, got))]


def test_a_new_batch_shape_starts_from_the_kept_caches(engines):
    """One dialogue, then it and a new one in a batch of two (the static path's first call at that shape copies the
    kept cache into a static cache it has not filled yet): the replies of a full prefill."""
    keeping, fresh = engines
    params = SamplingConfig(temperature=1.0, max_new_tokens=6)
    [first] = keeping.generate_ids([[5, 6, 7]], params, seeds=[1])
    before = keeping.stats["prefill_tokens"]
    two = [[5, 6, 7] + first.token_ids + [9, 10], [11, 12, 13, 14]]
    got, want = keeping.generate_ids(two, params, seeds=[2, 3]), fresh.generate_ids(two, params, seeds=[2, 3])
    assert [g.token_ids for g in got] == [w.token_ids for w in want]
    assert keeping.stats["prefill_tokens"] - before == 3 + 4  # the reply's last id and the user's two; the new row


def test_one_id_prompts_that_match_a_kept_cache_are_run_whole(engines):
    """A one-id prompt has no cache of its own to take from a kept one (its id is run by the decode loop)."""
    keeping, fresh = engines
    greedy = SamplingConfig(temperature=0, max_new_tokens=4)
    keeping.generate_ids([[5]], greedy)
    got, want = keeping.generate_ids([[5], [5]], greedy), fresh.generate_ids([[5], [5]], greedy)
    assert [g.token_ids for g in got] == [w.token_ids for w in want]


def test_a_weight_change_drops_the_kept_caches(engines):
    keeping, fresh = engines
    prompt = _user(9, 0, keeping.tokenizer.vocab_size)
    greedy = SamplingConfig(temperature=0, max_new_tokens=5)
    [first] = keeping.generate_ids([prompt], greedy)
    saved = [p.detach().clone() for p in keeping.model.parameters()]
    try:
        with torch.no_grad():
            for p in keeping.model.parameters():
                p.mul_(1.5)  # an optimizer step on a shared model: in place, no load_weights
        follow = prompt + first.token_ids + [7, 8]
        [got] = keeping.generate_ids([follow], greedy)
        [want] = fresh.generate_ids([follow], greedy)
        assert got.token_ids == want.token_ids and got.logprobs == pytest.approx(want.logprobs, abs=1e-4)
    finally:
        with torch.no_grad():
            for p, kept in zip(keeping.model.parameters(), saved):
                p.copy_(kept)


@pytest.mark.parametrize("decode", ["generate", "static"])
def test_ten_turn_dialogue_prefills_each_token_once(tiny_model_dir, decode):
    engine = HFEngine(tiny_model_dir, decode=decode)
    rollout = DialogueRollout(engine, Factory({"ann": 10}),
                              config=RolloutConfig(max_turns=10, max_new_tokens=8, seed=3, schedule="rounds"))
    [sample] = rollout.run([profile("ann")])
    assert sample.n_turns == 10 and len(sample.segments) == 1  # direct mode: one causal sequence
    final = len(sample.input_ids)
    assert engine.stats["prefill_tokens"] <= 1.1 * final


@pytest.mark.parametrize("mode", ["direct", "think"])
def test_rollouts_with_and_without_kept_caches_are_equal(engines, mode):
    keeping, fresh = engines
    cfg = RolloutConfig(max_turns=4, max_new_tokens=8, seed=5, schedule="rounds", mode=mode, temperature=1.0)
    runs = [DialogueRollout(e, Factory({"ann": 4, "bob": 3}), config=cfg).run([profile("ann"), profile("bob")],
                                                                             group_size=2)
            for e in (keeping, fresh)]
    for a, b in zip(*runs):
        assert a.input_ids == b.input_ids and a.action_mask == b.action_mask and a.segments == b.segments
        assert a.old_logprobs == pytest.approx(b.old_logprobs, abs=1e-4)


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
