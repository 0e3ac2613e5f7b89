"""Token log-probs and entropy through the LM head, a chunk of positions at a time.

The full computation (logits = lm_head(hidden), log_softmax, gather) holds a [N, V] float32 tensor for N
token positions and a vocabulary of V ids, and autograd keeps it (and the softmax of the entropy) until the
backward: for one 15,000-token dialogue of Qwen2.5-7B (V = 152,064) that is 8.5 GiB per float32 copy.
Here the head is applied to `chunk` positions at a time and nothing vocabulary-sized is kept: the forward
saves the hidden states (N x H, already alive for the layers' backward) and the log-sum-exp (N floats), and
the backward recomputes each chunk's logits from them (the recomputation costs one more head matmul).

Per position, with z = head(h) / temperature, p = softmax(z), y the label:

    logprob   = z_y - logsumexp(z)                 d logprob / dz = onehot(y) - p
    entropy   = logsumexp(z) - sum(p z)            d entropy / dz = -p (z - sum(p z))

so the gradient flowing to z is g_lp (onehot(y) - p) - g_ent p (z - E_p[z]), divided by the temperature,
and then to the hidden states (g W) and to the head's weight (g^T h) and bias.

A plain nn.Linear head (every transformers causal LM this lab trains) takes that custom autograd path. A
head that is anything else (a LoRA-adapted head, or a ZeRO-3-partitioned weight, whose parameters only exist
inside the module's own forward) is called as a module per chunk under torch.utils.checkpoint, which also
recomputes the chunk in the backward instead of keeping it.

Memory (trainer.plan_memory.logit_chunk_bytes counts it): at most `chunk` x V entries alive at once, at most
HEAD_BYTES_PER_LOGIT bytes each: measured with the peak resident size around a forward and backward of
V = 152,064, 2,000 positions (benchmarks/gpu_check.py's logits check does it on a GPU), 12.0 bytes without the
entropy and 15.4 (float32) / 15.7 (bfloat16) with it: the float32 logits, their softmax and float32
temporaries of the backward (a bfloat16 head's output is cast at once).
"""
from __future__ import annotations

import weakref
from typing import Any, Optional

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from trainer.learning.logits.processing import LogitProcessing, forward_mismatch, logit_processing

LOGIT_CHUNK_BYTES = 256 * 1024 ** 2  # one float32 [chunk, V] block: sets the chunk's number of positions
HEAD_BYTES_PER_LOGIT = 16  # the most bytes per entry of a chunk alive at once (module docstring)


def chunk_positions(vocab: int, chunk_bytes: int = LOGIT_CHUNK_BYTES) -> int:
    """Positions per chunk so that one float32 [chunk, vocab] block is at most `chunk_bytes` (at least 16)."""
    return max(16, chunk_bytes // (4 * max(1, vocab)))


def _compute_dtype(device: torch.device, weight: Tensor) -> torch.dtype:
    """The dtype of the head's matmul: autocast's where autocast is on for the device (what the model's own
    forward would use), else the weight's."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return weight.dtype


def _chunk_logits(h: Tensor, weight: Tensor, bias: Optional[Tensor], temperature: float,
                  processing: LogitProcessing) -> tuple[Tensor, Optional[Tensor]]:
    """(float32 logits / temperature, the softcap's derivative 1 - tanh^2 or None) of a chunk."""
    z = F.linear(h.to(weight.dtype), weight, bias).float()
    if processing.scale != 1.0:
        z.mul_(processing.scale)
    slope = None
    if processing.softcap:
        cap = processing.softcap
        t = z.div_(cap).tanh_()
        z = t * (cap / temperature)
        slope = t.square_().neg_().add_(1.0)
    elif temperature != 1.0:
        z.div_(temperature)
    return z, slope


def _accumulate(total: Tensor, g: Tensor, h: Tensor) -> None:
    """total (float32 [V, H]) += g^T h for 16-bit g and h on CUDA: the matmul of the 16-bit operands (as
    autograd's) with its float32 result added in place, or in float32 where that matmul is missing."""
    try:
        torch.addmm(total, g.t(), h.to(g.dtype), out_dtype=torch.float32, out=total)
    except (RuntimeError, NotImplementedError, TypeError):
        total.addmm_(g.t().float(), h.float())


class _LinearHeadLogprobs(torch.autograd.Function):
    """(logprobs [N], entropy [N]) of labels under softmax(processing(linear(hidden)) / temperature), chunked
    (module docstring); the entropy is zeros when not asked for."""

    @staticmethod
    def forward(ctx, hidden: Tensor, weight: Tensor, bias: Optional[Tensor], labels: Tensor, temperature: float,
                chunk: int, with_entropy: bool, processing: LogitProcessing) -> tuple[Tensor, Tensor]:
        n = hidden.shape[0]
        dtype = _compute_dtype(hidden.device, weight)
        logprobs = torch.empty(n, dtype=torch.float32, device=hidden.device)
        entropy = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty(n, dtype=torch.float32, device=hidden.device)
        with torch.autocast(hidden.device.type, enabled=False):
            w, b_ = weight.to(dtype), (bias.to(dtype) if bias is not None else None)
            for a in range(0, n, chunk):
                b = min(n, a + chunk)
                z, _ = _chunk_logits(hidden[a:b], w, b_, temperature, processing)
                lse[a:b] = torch.logsumexp(z, dim=-1)
                logprobs[a:b] = z.gather(1, labels[a:b, None]).squeeze(1) - lse[a:b]
                if with_entropy:
                    p = torch.exp(z - lse[a:b, None])
                    entropy[a:b] = lse[a:b] - (p.mul_(z)).sum(dim=-1)
                del z
        ctx.save_for_backward(hidden, weight, bias, labels, lse)
        ctx.temperature, ctx.chunk, ctx.with_entropy = temperature, chunk, with_entropy
        ctx.processing, ctx.dtype = processing, dtype
        ctx.set_materialize_grads(False)  # an unused output (the entropy without its bonus) gets None, not zeros
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs: Optional[Tensor], grad_entropy: Optional[Tensor]):
        hidden, weight, bias, labels, lse = ctx.saved_tensors
        n, t = hidden.shape[0], ctx.temperature
        use_entropy = ctx.with_entropy and grad_entropy is not None
        if grad_logprobs is None:
            grad_logprobs = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = bias is not None and ctx.needs_input_grad[2]
        grad_h = torch.empty_like(hidden) if need_h else None
        # summed over the chunks in float32 (one [V, H] float32 buffer while the backward runs, which
        # trainer.plan_memory counts): a 16-bit sum's error would grow with the number of chunks
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
        with torch.autocast(hidden.device.type, enabled=False):  # the forward's precision, whatever is on now
            w, b_ = weight.to(ctx.dtype), (bias.to(ctx.dtype) if bias is not None else None)
            for a in range(0, n, ctx.chunk):
                b = min(n, a + ctx.chunk)
                z, slope = _chunk_logits(hidden[a:b], w, b_, t, ctx.processing)
                p = torch.exp(z - lse[a:b, None])
                if use_entropy:  # -g_ent p (z - E_p[z]), built in z's storage
                    mean_z = (p * z).sum(dim=-1, keepdim=True)
                    g = z.sub_(mean_z).mul_(p).mul_(-grad_entropy[a:b, None])
                    g.sub_(p.mul_(grad_logprobs[a:b, None]))
                else:
                    del z
                    g = p.mul_(-grad_logprobs[a:b, None])
                rows = torch.arange(b - a, device=g.device)
                g[rows, labels[a:b]] += grad_logprobs[a:b]
                if t != 1.0:
                    g.div_(t)
                if slope is not None:  # through cap tanh(z / cap)
                    g.mul_(slope)
                if ctx.processing.scale != 1.0:
                    g.mul_(ctx.processing.scale)
                if need_b:
                    grad_b.add_(g.sum(dim=0))
                in_float32 = not (g.is_cuda and ctx.dtype != torch.float32)
                if need_w and in_float32:
                    grad_w.addmm_(g.t(), hidden[a:b].float())
                g = g.to(ctx.dtype)
                if need_h:
                    grad_h[a:b] = g @ w
                if need_w and not in_float32:
                    _accumulate(grad_w, g, hidden[a:b])
                del g, p, slope
        return (grad_h, grad_w.to(weight.dtype) if need_w else None, grad_b.to(bias.dtype) if need_b else None,
                None, None, None, None, None)


def _forward(model: Any, module: nn.Module, ids: Tensor, attn: Optional[Tensor]) -> tuple[Tensor, Tensor]:
    captured: list[Tensor] = []

    def keep(_module: nn.Module, _inputs: Any, output: Any) -> None:
        captured.append(output[0] if isinstance(output, tuple) else output.last_hidden_state)

    handle = module.get_decoder().register_forward_hook(keep)
    try:
        out = model(input_ids=ids, attention_mask=attn, logits_to_keep=1, use_cache=False)
    finally:
        handle.remove()
    return captured[-1], out.logits[:, -1]


def final_hidden(model: Any, module: nn.Module, ids: Tensor, attn: Optional[Tensor]) -> Tensor:
    """[B, T, H] hidden states after the final norm of a transformers causal LM `module`: `model` (the module, or
    its DeepSpeed / peft wrapper) is called whole, so every wrapper runs as in any forward, with logits for one
    position only, and the decoder's output is taken with a forward hook."""
    return _forward(model, module, ids, attn)[0]


_CHECKED: "weakref.WeakSet[nn.Module]" = weakref.WeakSet()


def model_logprobs(model: Any, module: nn.Module, ids: Tensor, attn: Optional[Tensor], on: Tensor,
                   temperature: float, with_entropy: bool, chunk: Optional[int] = None) -> tuple[Tensor, Tensor]:
    """head_logprobs of the positions `on` [B, T-1] (those predicting ids[:, 1:]) of a causal LM, with the
    logit processing its config declares (trainer.learning.logits.processing). The first call for a module
    compares the processed head output with the forward's own logits at the last position (which the forward
    computes anyway) and raises ValueError where they differ: a model whose forward does something else to its
    logits is refused before its first update."""
    processing = logit_processing(module.config)
    hidden, last_logits = _forward(model, module, ids, attn)
    head = module.get_output_embeddings()
    if module not in _CHECKED:
        with torch.no_grad():
            problem = forward_mismatch(processing.apply(head(hidden[:, -1]).float()), last_logits,
                                       str(getattr(module.config, "model_type", "")))
        if problem:
            raise ValueError(problem)
        _CHECKED.add(module)
    return head_logprobs(hidden[:, :-1][on], head, ids[:, 1:][on], temperature, with_entropy, chunk, processing)


def _module_chunk(head: nn.Module, h: Tensor, labels: Tensor, temperature: float,
                  with_entropy: bool, processing: LogitProcessing) -> tuple[Tensor, Tensor]:
    z = processing.apply(head(h).float())
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    lp = z.gather(1, labels[:, None]).squeeze(1) - lse
    if not with_entropy:
        return lp, torch.zeros_like(lp)
    return lp, lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)


def _plain_linear(head: nn.Module) -> bool:
    """A torch nn.Linear whose weight is a whole tensor here (not a ZeRO-3 partition, which carries ds_id)."""
    return type(head) is nn.Linear and not hasattr(head.weight, "ds_id")


def head_logprobs(hidden: Tensor, head: nn.Module, labels: Tensor, temperature: float = 1.0,
                  with_entropy: bool = False, chunk: Optional[int] = None,
                  processing: LogitProcessing = LogitProcessing()) -> tuple[Tensor, Tensor]:
    """Log-probs [N] of `labels` [N] and entropies [N] (zeros unless with_entropy) under
    softmax(processing(head(hidden)) / temperature), hidden [N, H], a chunk of positions at a time (module
    docstring); float32, with gradients to the hidden states and the head's trained parameters. `processing`:
    what the model's forward does to the head's output (trainer.learning.logits.processing)."""
    vocab = head.out_features if isinstance(head, nn.Linear) else getattr(head, "out_features", 0) or \
        head.weight.shape[0]
    chunk = chunk or chunk_positions(vocab)
    if _plain_linear(head):
        return _LinearHeadLogprobs.apply(hidden, head.weight, head.bias, labels, float(temperature), chunk,
                                         with_entropy, processing)
    from torch.utils.checkpoint import checkpoint

    parts = []
    for a in range(0, hidden.shape[0], chunk):
        h, y = hidden[a:a + chunk], labels[a:a + chunk]
        if torch.is_grad_enabled():
            parts.append(checkpoint(_module_chunk, head, h, y, float(temperature), with_entropy, processing,
                                    use_reentrant=False))
        else:
            parts.append(_module_chunk(head, h, y, float(temperature), with_entropy, processing))
    if not parts:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
