"""The transformers engine's fast decode path: a static KV cache, one decode step captured as a CUDA graph.

transformers' `generate` with its growing cache spends 16-20 ms a decode step on a 1.3B model at any batch
size (measured on an H200, docs/results.md): the step is thousands of small kernel launches, not
the 0.55 ms it takes to read the weights. Here the step's kernels are recorded once per (batch bucket, cache
length bucket) into a CUDA graph and replayed, so a step costs about its memory traffic:

- the cache is transformers' StaticCache (fixed addresses, written in place at its own running position);
  the batch is padded up to a power of two and the cache length up to a multiple of CACHE_BUCKET, so a
  rollout whose prompts vary in width reuses one graph; one graph is kept (a new shape replaces it, so the
  memory held is one cache, which trainer.plan counts as `sampling_kv_cache`);
- the prompt (prefill) runs eagerly through transformers' own masking; the decode step gets a 4-D boolean
  mask over the cache and an attention (`gqa_decode_attention`) that reads the grouped keys and values once
  instead of repeating them per query head as the SDPA path does when a mask is given;
- sampling is Gumbel-max over softmax(logits / T) in the top-p nucleus, as `_RowSampler` in hf_engine, but
  each row's uniforms come from a counter-based hash of (row seed, step, vocabulary index) computed on the
  device: no per-row host generators, no host round trip per step, and a row's draws still depend only on
  its own seed (not on its batch mates). Log-probs follow trainer/policies/base.py's convention.

Graphs are captured only on CUDA and only while the weights keep their addresses (checked every call: a
change, e.g. ZeRO-3 gathering, recaptures); on CPU the same loop runs eagerly (`use_graphs=False`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

CACHE_BUCKET = 256  # cache lengths are rounded up to a multiple of this (fewer distinct graphs)
ATTENTION_NAME = "rlver_gqa_decode"
CHECK_EVERY = 4  # decode steps between checks whether every row has ended (each check waits for the GPU)
_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


_GOLDEN, _MIX1, _MIX2 = _signed(0x9E3779B97F4A7C15), _signed(0xBF58476D1CE4E5B9), _signed(0x94D049BB133111EB)


def _shr(x: Any, k: int) -> Any:
    """Logical right shift of int64 tensors (torch's >> is arithmetic)."""
    return (x >> k) & ((1 << (64 - k)) - 1)


def mix64(x: Any) -> Any:
    """splitmix64's finaliser on int64 tensors (wrapping arithmetic): a counter -> 64 well-mixed bits."""
    z = x + _GOLDEN
    z = (z ^ _shr(z, 30)) * _MIX1
    z = (z ^ _shr(z, 27)) * _MIX2
    return z ^ _shr(z, 31)


def row_uniforms(row_keys: Any, step: int, vocab: int) -> Any:
    """[B, vocab] uniforms in (0, 1): a function of (row key, step, vocabulary index) only."""
    import torch

    counter = torch.arange(vocab, device=row_keys.device, dtype=torch.int64) + step * vocab
    bits = mix64(row_keys[:, None] ^ mix64(counter)[None, :])
    return (_shr(bits, 11).double() + 0.5) * (1.0 / (1 << 53))


def nucleus_logits(logits: Any, temperature: float, top_p: float) -> Any:
    """float32 logits / T with the ids outside the top-p nucleus at -inf (the most likely id always stays)."""
    import torch

    logits = logits.float() / temperature
    if top_p < 1.0:
        ordered, order = torch.sort(logits, descending=False)
        outside = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        outside[..., -1:] = False
        logits = logits.masked_fill(outside.scatter(1, order, outside), float("-inf"))
    return logits


@dataclass
class Picker:
    """Chooses each row's next id from its logits: greedy (temperature 0) or Gumbel-max with row keys."""
    temperature: float
    top_p: float
    row_keys: Any  # [B] int64 on the device (mix64 of the row seeds); unused when greedy

    def __call__(self, logits: Any, step: int) -> tuple[Any, Any]:
        import torch

        if self.temperature == 0:
            logp = torch.log_softmax(logits.float(), dim=-1)
            chosen = logp.argmax(dim=-1, keepdim=True)
        else:
            logp = torch.log_softmax(nucleus_logits(logits, self.temperature, self.top_p), dim=-1)
            u = row_uniforms(self.row_keys, step, logp.shape[-1])
            gumbel = -torch.log(-torch.log(u)).float()
            chosen = (logp + gumbel).argmax(dim=-1, keepdim=True)
        return chosen[:, 0], logp.gather(-1, chosen)[:, 0]


def gqa_decode_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any,
                         scaling: Optional[float] = None, dropout: float = 0.0, **kwargs: Any) -> tuple[Any, None]:
    """Attention of one new token per row over the whole static cache, grouped-query aware: query heads are
    folded onto their key/value head, so the cache is read once per step (no repeat_kv copy). attention_mask:
    [B, 1, 1, L] booleans, True where a row may attend. Returns [B, 1, heads, head_dim] as transformers'
    attention functions do."""
    import torch

    b, heads, q_len, dim = query.shape
    kv_heads = key.shape[1]
    q = query.reshape(b, kv_heads, (heads // kv_heads) * q_len, dim)
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * (scaling if scaling is not None else dim ** -0.5)
    scores = scores.masked_fill(~attention_mask, float("-inf"))  # [B, 1, 1, L] broadcasts over the groups
    out = torch.matmul(scores.softmax(dim=-1).to(value.dtype), value)
    return out.reshape(b, heads, q_len, dim).transpose(1, 2).contiguous(), None


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, gqa_decode_attention)


class _DecodeAttention:
    """Within the block, the model's attention is gqa_decode_attention (the decode step); restored after."""

    def __init__(self, model: Any):
        self.config = model.config

    def __enter__(self) -> None:
        self.saved = self.config._attn_implementation
        self.config._attn_implementation = ATTENTION_NAME

    def __exit__(self, *exc: Any) -> None:
        self.config._attn_implementation = self.saved


class _Slot:
    """A static cache of one (batch, length) shape, the decode step's fixed inputs, and its graph."""

    def __init__(self, model: Any, batch: int, length: int, device: Any, weights_key: tuple):
        import torch
        from transformers import StaticCache

        self.batch, self.length, self.weights_key = batch, length, weights_key
        self.cache = StaticCache(config=model.config, max_cache_len=length)
        self.ids = torch.zeros((batch, 1), dtype=torch.long, device=device)
        self.positions = torch.zeros((batch, 1), dtype=torch.long, device=device)
        self.mask = torch.zeros((batch, length), dtype=torch.bool, device=device)
        self.graph: Any = None
        self.logits: Any = None

    def step(self, model: Any) -> Any:
        out = model(input_ids=self.ids, position_ids=self.positions, attention_mask=self.mask[:, None, None, :],
                    past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :]


class StaticDecoder:
    """Decodes a left-padded batch with a static cache; `use_graphs` replays the captured decode step."""

    def __init__(self, model: Any, device: str, use_graphs: bool):
        _register_attention()
        self.model, self.device, self.use_graphs = model, device, use_graphs
        self.slot: Optional[_Slot] = None
        self.captures = 0  # graphs captured so far (a new shape or new weight addresses)
        # one warm-up stream for every capture: torch keeps a cuBLAS workspace per (handle, stream) for the life
        # of the process, so a new stream per capture would add one workspace per capture (trainer.plan_memory)
        self._warmup_stream: Any = None

    def _weights_key(self) -> tuple:
        return tuple(p.data_ptr() for p in self.model.parameters())

    def _slot_for(self, batch: int, length: int) -> _Slot:
        key = self._weights_key() if self.use_graphs else ()
        slot = self.slot
        if slot is None or slot.batch != batch or slot.length != length or slot.weights_key != key:
            self.slot = None  # the old cache and graph go before the new ones are allocated
            slot = self.slot = _Slot(self.model, batch, length, self.device, key)
        return slot

    def _capture(self, slot: _Slot) -> None:
        import torch

        if self._warmup_stream is None:
            self._warmup_stream = torch.cuda.Stream()
        stream = self._warmup_stream
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up off the capture (lazy kernels, workspaces)
            for _ in range(2):
                slot.step(self.model)
        torch.cuda.current_stream().wait_stream(stream)
        for layer in slot.cache.layers:  # the warm-up wrote two columns: the steps to come write them again
            layer.cumulative_length.sub_(2)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the overlapped learner may run CUDA work in another thread meanwhile (max_staleness >= 1)
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            slot.logits = slot.step(self.model)
        slot.graph = graph
        self.captures += 1

    def decode(self, input_ids: Any, attention: Any, max_new_tokens: int, picker_for: Callable[[int], Picker],
               stop_ids: list[int], should_stop: Callable[[], bool],
               check_rows: Optional[Callable[[Any, int], Any]] = None) -> tuple[Any, Any]:
        """(new ids [B, N], their log-probs [B, N]) on the CPU for left-padded `input_ids` [B, W]; N <= max_new_tokens
        (the loop ends once every row has sampled a stop id). `picker_for(padded batch)` builds the sampler;
        `check_rows(new ids so far [B, t], t)` may return a [B] bool tensor of rows to end (repetition)."""
        import torch

        rows, width = input_ids.shape
        batch = 1 << (rows - 1).bit_length()
        length = -(-(width + max_new_tokens) // CACHE_BUCKET) * CACHE_BUCKET
        ids = torch.cat([input_ids, input_ids[:1].expand(batch - rows, -1)]).to(self.device)
        attn = torch.cat([attention, attention[:1].expand(batch - rows, -1)]).to(self.device)
        picker = picker_for(batch)
        slot = self._slot_for(batch, length)
        slot.cache.reset()
        positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=positions, past_key_values=slot.cache,
                         use_cache=True, logits_to_keep=1)
        tokens = torch.zeros((batch, max_new_tokens), dtype=torch.long, device=self.device)
        logprobs = torch.zeros((batch, max_new_tokens), dtype=torch.float32, device=self.device)
        stops = torch.tensor(stop_ids, device=self.device)
        ended = torch.zeros(batch, dtype=torch.bool, device=self.device)
        chosen, logp = picker(out.logits[:, -1, :], 0)
        del out
        slot.mask.zero_()
        slot.mask[:, :width] = attn.bool()
        next_position = positions[:, -1:] + 1
        steps = max_new_tokens
        with _DecodeAttention(self.model):
            for t in range(max_new_tokens):
                tokens[:, t], logprobs[:, t] = chosen, logp
                ended |= torch.isin(chosen, stops)
                if t + 1 == max_new_tokens:
                    break
                if (t + 1) % CHECK_EVERY == 0 or should_stop():
                    if check_rows is not None:
                        flagged = check_rows(tokens[:rows, :t + 1], t + 1)
                        if flagged is not None:
                            ended[:rows] |= flagged.to(self.device)
                    if should_stop() or bool(ended[:rows].all()):
                        steps = t + 1
                        break
                slot.ids.copy_(chosen[:, None])
                slot.positions.copy_(next_position + t)
                slot.mask[:, width + t] = True
                if self.use_graphs:
                    if slot.graph is None:
                        self._capture(slot)
                    slot.graph.replay()
                    logits = slot.logits
                else:
                    logits = slot.step(self.model)
                chosen, logp = picker(logits, t + 1)
        return tokens[:rows, :steps].cpu(), logprobs[:rows, :steps].cpu()
