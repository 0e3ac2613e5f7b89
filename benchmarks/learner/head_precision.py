"""How far the chunked LM-head log-probs' gradients are from float64, by the number of chunks.

    .venv/bin/python benchmarks/learner/head_precision.py [--positions 4096] [--vocab 4096] [--hidden 256] [--json]

A bfloat16 head [V, H] and bfloat16 hidden states [N, H] (random, the logits a few nats wide), labels and
upstream gradients for the log-probs and the entropy; trainer.learning.head_logprobs at 1, 64 and 256 chunks
(chunk = N / count positions) against the same computation in float64 from the same bfloat16 inputs. Prints,
per chunk count, the relative error ||g - g64|| / ||g64|| of the gradients of the head's weight and bias and of
the hidden states, and of the log-probs. An error that stays flat as the chunks multiply is the point (the
remainder is the bfloat16 logits themselves, which the model's own forward makes too); a 16-bit running sum
of the weight's gradient grows with the count.
"""
from __future__ import annotations

import argparse
import json

import torch
from torch import nn

CHUNK_COUNTS = (1, 64, 256)


def _reference(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, labels: torch.Tensor,
               g_lp: torch.Tensor, g_ent: torch.Tensor) -> dict[str, torch.Tensor]:
    h = hidden.double().requires_grad_(True)
    w, b = weight.double().requires_grad_(True), bias.double().requires_grad_(True)
    logp = torch.log_softmax(h @ w.t() + b, dim=-1)
    lp = logp.gather(1, labels[:, None]).squeeze(1)
    ent = -(logp.exp() * logp).sum(-1)
    ((lp * g_lp).sum() + (ent * g_ent).sum()).backward()
    return {"weight": w.grad, "bias": b.grad, "hidden": h.grad, "logprobs": lp.detach()}


def relative_errors(positions: int = 4096, vocab: int = 4096, hidden_size: int = 256, seed: int = 0
                    ) -> list[dict[str, float]]:
    """One row per chunk count: {"chunks", "positions_per_chunk", "weight", "bias", "hidden", "logprobs"}."""
    from trainer.learning.head_logprobs import head_logprobs

    gen = torch.Generator().manual_seed(seed)
    head = nn.Linear(hidden_size, vocab, bias=True).to(torch.bfloat16)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden_size, generator=gen) / hidden_size ** 0.5 * 3)
        head.bias.copy_(torch.randn(vocab, generator=gen) * 0.1)
    hidden = torch.randn(positions, hidden_size, generator=gen).to(torch.bfloat16)
    labels = torch.randint(0, vocab, (positions,), generator=gen)
    g_lp, g_ent = torch.randn(positions, generator=gen), torch.randn(positions, generator=gen) * 0.1
    ref = _reference(hidden, head.weight.detach(), head.bias.detach(), labels, g_lp, g_ent)
    rows = []
    for count in CHUNK_COUNTS:
        chunk = max(1, positions // count)
        h = hidden.clone().requires_grad_(True)
        head.zero_grad(set_to_none=True)
        lp, ent = head_logprobs(h, head, labels, 1.0, with_entropy=True, chunk=chunk)
        ((lp * g_lp).sum() + (ent * g_ent).sum()).backward()
        got = {"weight": head.weight.grad, "bias": head.bias.grad, "hidden": h.grad, "logprobs": lp.detach()}
        row = {"chunks": -(-positions // chunk), "positions_per_chunk": chunk}
        for name, value in got.items():
            row[name] = float((value.double() - ref[name]).norm() / ref[name].norm())
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = relative_errors(args.positions, args.vocab, args.hidden)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"bfloat16 head, N {args.positions}, V {args.vocab}, H {args.hidden}: relative error against float64")
    print("| chunks | positions per chunk | weight grad | bias grad | hidden grad | log-probs |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['chunks']} | {r['positions_per_chunk']} | {r['weight']:.2e} | {r['bias']:.2e} | "
              f"{r['hidden']:.2e} | {r['logprobs']:.2e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
