"""Log-probs and entropy through the LM head a chunk at a time equal the full [N, V] computation, values and
gradients, and the learner keeps no vocabulary-sized tensor for the backward."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from trainer.config import TrainConfig
from trainer.learning.head_logprobs import chunk_positions, head_logprobs
from trainer.learning.learner import Learner, make_batch


def _full(hidden: torch.Tensor, head: nn.Module, labels: torch.Tensor, temperature: float):
    z = head(hidden).float() / temperature
    logp = torch.log_softmax(z, dim=-1)
    return logp.gather(1, labels[:, None]).squeeze(1), -(logp.exp() * logp).sum(dim=-1)


class _Wrapped(nn.Module):
    """A head that is not a plain nn.Linear (as a LoRA-adapted head is): takes the checkpointed path."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.inner = linear
        self.out_features = linear.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)


@pytest.mark.parametrize("wrapped", [False, True])
@pytest.mark.parametrize("temperature, bias", [(1.0, False), (0.7, True)])
def test_chunked_values_and_gradients_equal_the_full_computation(wrapped: bool, temperature: float, bias: bool):
    torch.manual_seed(0)
    n, h, v = 37, 16, 301
    linear = nn.Linear(h, v, bias=bias)
    head = _Wrapped(linear) if wrapped else linear
    labels = torch.randint(0, v, (n,))
    w_lp, w_ent = torch.randn(n), torch.randn(n)

    def grads(fn):
        hidden = torch.randn(n, h, generator=torch.Generator().manual_seed(1), requires_grad=True)
        linear.zero_grad(set_to_none=True)
        lp, ent = fn(hidden)
        ((lp * w_lp).sum() + (ent * w_ent).sum()).backward()
        return lp.detach(), ent.detach(), hidden.grad, linear.weight.grad.clone(), \
            (linear.bias.grad.clone() if bias else None)

    full = grads(lambda x: _full(x, head, labels, temperature))
    chunked = grads(lambda x: head_logprobs(x, head, labels, temperature, with_entropy=True, chunk=8))
    for a, b in zip(full, chunked):
        if a is not None:
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_an_unused_entropy_leaves_the_logprob_gradient_alone():
    torch.manual_seed(0)
    head = nn.Linear(8, 50)
    hidden = torch.randn(10, 8, requires_grad=True)
    labels = torch.randint(0, 50, (10,))
    lp, _ = head_logprobs(hidden, head, labels, 1.0, with_entropy=True, chunk=3)
    lp.sum().backward()
    expected = torch.autograd.grad(_full(hidden, head, labels, 1.0)[0].sum(), hidden)[0]
    torch.testing.assert_close(hidden.grad, expected, atol=1e-5, rtol=1e-5)


def test_chunk_positions_bound_one_float32_block_and_the_plan_counts_the_same():
    from trainer import plan_memory
    from trainer.learning.head_logprobs import HEAD_BYTES_PER_LOGIT, LOGIT_CHUNK_BYTES

    assert chunk_positions(152_064, 512 * 1024 ** 2) * 152_064 * 4 <= 512 * 1024 ** 2
    assert chunk_positions(10 ** 9) == 16
    assert plan_memory.LOGIT_CHUNK_BYTES == LOGIT_CHUNK_BYTES
    assert plan_memory.HEAD_BYTES_PER_LOGIT == HEAD_BYTES_PER_LOGIT


def _batch():
    return make_batch([{"input_ids": [5, 6, 7, 8, 9, 10, 11, 12], "action_mask": [0, 0, 1, 1, 0, 1, 1, 1],
                        "reward": 1.0, "group_id": 0},
                       {"input_ids": [11, 12, 13, 14, 15], "action_mask": [0, 1, 1, 0, 1], "reward": 0.0,
                        "group_id": 0}], pad_token_id=0)


def test_learner_logprobs_entropy_and_gradients_equal_the_full_logits(tiny_model_dir: Path):
    """The tiny model ties its head to the embedding: the head's gradient and the embedding's add up."""
    learner = Learner(TrainConfig(model=str(tiny_model_dir), algorithm="grpo", temperature=0.7, entropy_coef=0.01),
                      tiny_model_dir)
    model = learner.policy.module
    batch = _batch()
    on = batch.action_mask.bool()
    weights = torch.randn(on.shape, generator=torch.Generator().manual_seed(0))

    def run(full: bool):
        model.zero_grad(set_to_none=True)
        if full:
            z = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits[:, :-1].float() / 0.7
            logp = torch.log_softmax(z, -1)
            lp = logp.gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)
            ent = -(logp.exp() * logp).sum(-1)
        else:
            lp, ent = learner._logprobs(learner.policy, batch.input_ids, batch.attention_mask, batch.action_mask,
                                        with_entropy=True)
        ((lp * weights * on).sum() + (ent * on).sum()).backward()
        return lp[on].detach(), ent[on].detach(), {k: p.grad.clone() for k, p in model.named_parameters()
                                                   if p.grad is not None}

    lp_full, ent_full, g_full = run(True)
    lp, ent, g = run(False)
    torch.testing.assert_close(lp, lp_full, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent, ent_full, atol=1e-5, rtol=1e-5)
    assert g.keys() == g_full.keys() and g
    for name in g:
        torch.testing.assert_close(g[name], g_full[name], atol=1e-5, rtol=1e-5, msg=name)


def test_learner_keeps_no_vocabulary_sized_tensor_for_the_backward(tiny_model_dir: Path):
    learner = Learner(TrainConfig(model=str(tiny_model_dir), algorithm="grpo", entropy_coef=0.01), tiny_model_dir)
    vocab = learner.policy.module.get_output_embeddings().out_features
    hidden = learner.policy.module.config.hidden_size
    batch = _batch()

    def logits_like(shapes: list[tuple[int, ...]]) -> list[tuple[int, ...]]:  # the head's weight has a hidden dim
        return [s for s in shapes if vocab in s and hidden not in s]

    saved: list[tuple[int, ...]] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(tuple(t.shape))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp, ent = learner._logprobs(learner.policy, batch.input_ids, batch.attention_mask, batch.action_mask,
                                    with_entropy=True)
    assert saved, "the forward kept nothing for the backward"
    assert not logits_like(saved), saved
    # the full computation does keep [B, T, V]-shaped logits: the check above can fail
    full: list[tuple[int, ...]] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: full.append(tuple(t.shape)) or t, lambda t: t):
        torch.log_softmax(learner.policy.module(input_ids=batch.input_ids).logits.float(), -1).sum().backward()
    assert logits_like(full)


def test_token_budget_packs_every_row_once_within_the_budget():
    from trainer.learning.batch import micro_batches

    lengths = [30, 5, 12, 12, 40, 3, 7, 25]
    batch = make_batch([{"input_ids": list(range(1, n + 1)), "action_mask": [0] + [1] * (n - 1), "reward": 0.0,
                         "group_id": 0} for n in lengths], pad_token_id=0)
    index = torch.tensor([0, 2, 3, 4, 5, 6, 7])
    chunks = micro_batches(batch, index, rows=2, max_tokens=36)
    assert sorted(torch.cat(chunks).tolist()) == index.tolist()
    for chunk in chunks:
        widest = max(lengths[i] for i in chunk.tolist())
        assert len(chunk) * widest <= 36 or len(chunk) == 1  # the 40-token row goes alone
    assert [len(c) for c in micro_batches(batch, index, rows=2)] == [2, 2, 2, 1]


def test_a_token_budget_gives_the_same_update_as_fixed_micro_batches(tiny_model_dir: Path):
    """Micro-batches only split the gradient's sum: packed by tokens (and cut to their longest row, without the
    padding mask) the update equals the fixed-count one."""
    samples = [{"input_ids": list(range(5, 5 + n)), "action_mask": [0, 0] + [1] * (n - 2), "reward": r,
                "group_id": i // 2} for i, (n, r) in enumerate([(9, 1.0), (4, 0.0), (12, 0.5), (6, 0.2)])]
    batch = make_batch(samples, pad_token_id=0)
    grads = []
    for changes in ({"micro_batch_size": 1}, {"micro_batch_size": 4}, {"max_tokens_per_micro_batch": 13}):
        cfg = TrainConfig(model=str(tiny_model_dir), algorithm="grpo", group_size=2, dialogues_per_step=4,
                          minibatch_size=4, entropy_coef=0.01, **changes)
        learner = Learner(cfg, tiny_model_dir)
        step = learner.policy.step

        def keep_grads_then_step() -> float:  # the accumulated gradient, as the optimizer gets it
            grads.append(torch.cat([p.grad.flatten() for p in learner.policy.module.parameters()]))
            return step()

        learner.policy.step = keep_grads_then_step
        learner.update(batch)
    assert grads[0].abs().max() > 0
    torch.testing.assert_close(grads[1], grads[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(grads[2], grads[0], atol=1e-6, rtol=1e-5)


def test_a_bfloat16_heads_gradient_error_does_not_grow_with_the_chunks():
    """The weight's and bias's gradients are summed over the chunks in float32: against float64, 256 chunks are
    as close as one (a bfloat16 running sum doubles the error by 64 chunks)."""
    from benchmarks.learner.head_precision import relative_errors

    one, *_, many = relative_errors(positions=1024, vocab=1024, hidden_size=64)
    assert many["chunks"] == 256 and one["chunks"] == 1
    for name in ("weight", "bias"):
        assert many[name] <= one[name] * 1.05, (name, one, many)
        assert one[name] < 6e-3  # what the bfloat16 logits themselves leave
    assert many["hidden"] == pytest.approx(one["hidden"], rel=1e-3)


def test_under_autocast_the_backward_uses_the_forwards_precision():
    """A float32 head under bfloat16 autocast: the forward's logits are bfloat16 (as the model's own forward makes
    them) and the backward recomputes them the same way, so its gradients are the full computation's under the
    same autocast; recomputed in float32 against a log-sum-exp of bfloat16 logits they are not."""
    torch.manual_seed(0)
    n, h, v = 200, 64, 1000
    head = nn.Linear(h, v)
    with torch.no_grad():
        head.weight.mul_(10.0)
    labels = torch.randint(0, v, (n,))
    w_lp = torch.randn(n)

    def run(full: bool):
        hidden = torch.randn(n, h, generator=torch.Generator().manual_seed(1), requires_grad=True)
        head.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            lp, ent = _full(hidden, head, labels, 0.7) if full else \
                head_logprobs(hidden, head, labels, 0.7, with_entropy=True, chunk=16)
        assert lp.dtype == torch.float32
        ((lp * w_lp).sum() + ent.sum()).backward()
        return lp.detach(), ent.detach(), hidden.grad, head.weight.grad, head.bias.grad

    full, chunked = run(True), run(False)
    for name, a, b, bound in zip(("logprobs", "entropy", "hidden", "weight", "bias"), full, chunked,
                                 (1e-5, 1e-4, 2e-3, 1e-2, 1e-2)):
        # the gradients' remaining difference: autograd rounds the logits' gradient to bfloat16, this sums it
        # in float32
        assert float((a - b).norm() / a.norm()) < bound, name
