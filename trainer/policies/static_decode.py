"""The transformers engine's fast decode path: a static KV cache, one decode step captured as a CUDA graph.

transformers' `generate` with its growing cache spends 16-20 ms a decode step on a 1.3B model at any batch
size (measured on an H200, docs/results.md): the step is thousands of small kernel launches, not
the 0.55 ms it takes to read the weights. Here the step's kernels are recorded once per (batch bucket, cache
length bucket) into a CUDA graph and replayed, so a step costs about its memory traffic:

- the cache is transformers' StaticCache (fixed addresses, written in place at its own running position);
  the batch is padded up to a power of two and the cache length up to a multiple of CACHE_BUCKET, so a
  rollout whose prompts vary in width reuses one graph; one graph is kept (a new shape replaces it, so the
  memory held is one cache, which trainer.plan counts as `sampling_kv_cache`);
- the prompt (prefill) runs eagerly through transformers' own masking, in groups of rows of at most
  PREFILL_TOKENS padded tokens (its activations do not grow with the batch); the decode step gets a 4-D boolean
  mask over the cache and an attention (`gqa_decode_attention`) that reads the grouped keys and values once
  instead of repeating them per query head as the SDPA path does when a mask is given;
- the whole decode step is captured, not only the model: the sampler, recording the chosen id and its
  log-prob, the end-of-row check against the stop ids, and the next step's inputs (ids, positions, the mask's
  new column) all run on the device from fixed buffers indexed by a step counter that lives on the device, so
  a step is one graph replay; the host looks at the rows only every CHECK_EVERY steps (all ended? a loop?);
- sampling is Gumbel-max over softmax(logits / T) in the top-p nucleus, as `_RowSampler` in hf_engine, but
  each row's uniforms come from a counter-based hash of (row seed, step, vocabulary index) computed on the
  device: no per-row host generators, no host round trip, and a row's draws depend only on its own seed (not
  on its batch mates). Gumbel-max rather than inverting the cumulative distribution at one uniform per row:
  the inverse moves its choice whenever float noise (another attention kernel, a kept cache) shifts any
  boundary past the uniform, which over a 49k vocabulary happened within a few hundred SmolLM2 tokens on
  CPU; Gumbel-max moves only when the two best scores are within the noise. Log-probs follow
  trainer/policies/base.py's convention;
- a dialogue's earlier turns come in as its kept cache (trainer.policies.kept_caches), copied row by row into
  the static cache, so only the last prompt column runs before decoding (no re-prefill).

Graphs are captured only on CUDA and only while the weights keep their addresses (checked every call: a
change, e.g. ZeRO-3 gathering, recaptures); a change of temperature, top-p or stop ids recaptures the graph
and keeps the cache. On CPU the same step runs eagerly (`use_graphs=False`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

CACHE_BUCKET = 256  # cache lengths are rounded up to a multiple of this (fewer distinct graphs)
ATTENTION_NAME = "rlver_gqa_decode"
PREFILL_TOKENS = 16_384  # a prompt's forward runs this many padded tokens at most at once (rows in groups)
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


def row_uniforms(row_keys: Any, step: Any, vocab: int) -> Any:
    """[B, vocab] uniforms in (0, 1): a function of (row key, step, vocabulary index) only; `step` an int or a
    device scalar (inside the captured step)."""
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

    def __call__(self, logits: Any, step: Any) -> tuple[Any, Any]:
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
    """A static cache of one (batch, length) shape, the decode step's fixed buffers, and its graph."""

    def __init__(self, model: Any, batch: int, length: int, device: Any, key: tuple, stop_ids: list[int]):
        import torch
        from transformers import StaticCache

        self.batch, self.length, self.key = batch, length, key
        self.cache = StaticCache(config=model.config, max_cache_len=length)
        self.ids = torch.zeros((batch, 1), dtype=torch.long, device=device)  # the ids fed to the next step
        self.positions = torch.zeros((batch, 1), dtype=torch.long, device=device)
        self.mask = torch.zeros((batch, length), dtype=torch.bool, device=device)
        self.row_keys = torch.zeros(batch, dtype=torch.int64, device=device)
        self.tokens = torch.zeros((batch, length), dtype=torch.long, device=device)  # chosen ids, by step
        self.logprobs = torch.zeros((batch, length), dtype=torch.float32, device=device)
        self.ended = torch.zeros(batch, dtype=torch.bool, device=device)  # a row has chosen a stop id
        self.step = torch.zeros(1, dtype=torch.long, device=device)  # index of the last chosen id
        self.column = torch.zeros(1, dtype=torch.long, device=device)  # cache column of the next fed id
        self.stops = torch.tensor(stop_ids, dtype=torch.long, device=device)
        self.graph: Any = None
        self.graph_key: tuple = ()  # (temperature, top_p) the graph's sampler was captured with

    def state(self) -> list[Any]:
        """The buffers a step changes (saved around the capture's warm-up)."""
        return [self.ids, self.positions, self.mask, self.tokens, self.logprobs, self.ended, self.step, self.column]

    def record(self, chosen: Any, logp: Any) -> None:
        """Write the chosen ids at the step counter's index and make them the next step's input."""
        self.tokens.index_copy_(1, self.step, chosen[:, None])
        self.logprobs.index_copy_(1, self.step, logp[:, None])
        self.ended |= (chosen[:, None] == self.stops[None, :]).any(dim=-1)
        self.ids.copy_(chosen[:, None])

    def forward(self, model: Any) -> Any:
        """Logits [B, V] of the ids in `ids`, written at the cache's running column (decode attention)."""
        out = model(input_ids=self.ids, position_ids=self.positions, attention_mask=self.mask[:, None, None, :],
                    past_key_values=self.cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1, :]

    def write_rows(self, rows: slice, columns: slice, layers: list[tuple[Any, Any]]) -> None:
        """Copy each layer's (keys, values) [rows, heads, columns, dim] into the static cache (allocated at the
        first write, [batch, heads, length, dim], as transformers' first update would)."""
        for layer, (keys, values) in zip(self.cache.layers, layers):
            if not layer.is_initialized:
                layer.lazy_initialization(keys[:1].expand(self.batch, -1, -1, -1),
                                          values[:1].expand(self.batch, -1, -1, -1))
            layer.keys[rows, :, columns] = keys
            layer.values[rows, :, columns] = values

    def set_filled(self, columns: int) -> None:
        """Tell every cache layer its first `columns` columns are filled (the next write goes after them)."""
        for layer in self.cache.layers:
            layer.cumulative_length.fill_(columns)

    def advance(self, model: Any, picker: Picker) -> None:
        """One decode step, all on the device (the captured unit): feed the last chosen ids at their cache
        column, pick and record the next ids, move positions and the mask one column on."""
        logits = self.forward(model)
        self.step += 1
        self.record(*picker(logits, self.step[0]))
        self.positions += 1
        self.column += 1
        self.mask.index_fill_(1, self.column, True)


class StaticDecoder:
    """Decodes a left-padded batch with a static cache; `use_graphs` replays the captured decode step."""

    def __init__(self, model: Any, device: str, use_graphs: bool):
        _register_attention()
        self.model, self.device, self.use_graphs = model, device, use_graphs
        self.slot: Optional[_Slot] = None
        self.captures = 0  # graphs captured so far (a new shape, new weight addresses or new sampling)
        self.columns = 0  # cache columns the last call filled (prompt width + ids run through the model)
        # one warm-up stream for every capture: torch keeps a cuBLAS workspace per (handle, stream) for the life
        # of the process, so a new stream per capture would add one workspace per capture (trainer.plan_memory)
        self._warmup_stream: Any = None

    def _weights_key(self) -> tuple:
        return tuple(p.data_ptr() for p in self.model.parameters())

    def _slot_for(self, batch: int, length: int, stop_ids: list[int]) -> _Slot:
        key = (batch, length, tuple(stop_ids), self._weights_key() if self.use_graphs else ())
        if self.slot is None or self.slot.key != key:
            self.slot = None  # the old cache and graph go before the new ones are allocated
            self.slot = _Slot(self.model, batch, length, self.device, key, stop_ids)
        return self.slot

    def filled_layers(self) -> list[tuple[Any, Any]]:
        """Each layer's (keys, values) of the last call, `columns` of them filled (kept_caches.KeptCaches.keep)."""
        return [(layer.keys, layer.values) for layer in self.slot.cache.layers] if self.slot is not None else []

    def _capture(self, slot: _Slot, picker: Picker) -> None:
        import torch

        slot.graph = None
        if self._warmup_stream is None:
            self._warmup_stream = torch.cuda.Stream()
        stream = self._warmup_stream
        saved = [t.clone() for t in slot.state()]
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm-up off the capture (lazy kernels, workspaces)
            for _ in range(2):
                slot.advance(self.model, picker)
        torch.cuda.current_stream().wait_stream(stream)
        for buffer, value in zip(slot.state(), saved):  # undo the warm-up: the steps to come run from here
            buffer.copy_(value)
        for layer in slot.cache.layers:  # the warm-up wrote two cache columns: the steps to come write them again
            layer.cumulative_length.sub_(2)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the overlapped learner may run CUDA work in another thread meanwhile (max_staleness >= 1)
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            slot.advance(self.model, picker)
        slot.graph, slot.graph_key = graph, (picker.temperature, picker.top_p)
        self.captures += 1

    def _prefill(self, slot: _Slot, ids: Any, attn: Any, positions: Any,
                 prefix: Optional[Iterable[list[tuple[Any, Any]]]]) -> Any:
        """The first id's logits [B, V]: the whole prompt run through the model, or with the rows' kept caches
        (`prefix`: per row, each layer's keys and values of every prompt id but the last, copied in at the row's
        left-padded columns as they come) only the last column, under the prompt's mask (set by decode)."""
        width = ids.shape[1]
        group = max(1, PREFILL_TOKENS // width)
        if prefix is None and group >= slot.batch:
            out = self.model(input_ids=ids, attention_mask=attn, position_ids=positions,
                             past_key_values=slot.cache, use_cache=True, logits_to_keep=1)
            return out.logits[:, -1, :]
        if prefix is None:  # rows in groups of at most PREFILL_TOKENS padded tokens, each group's cache copied in
            return self._prefill_in_groups(slot, ids, attn, positions, group)
        for row, layers in enumerate(prefix):
            if layers:  # a one-id prompt has no cache of its own
                slot.write_rows(slice(row, row + 1), slice(width - 1 - layers[0][0].shape[2], width - 1), layers)
        slot.set_filled(width - 1)
        slot.ids.copy_(ids[:, -1:])
        slot.positions.copy_(positions[:, -1:])
        with _DecodeAttention(self.model):
            return slot.forward(self.model)

    def _prefill_in_groups(self, slot: _Slot, ids: Any, attn: Any, positions: Any, group: int) -> Any:
        """The whole prompt run through the model `group` rows at a time (the peak of one group's forward),
        each group's cache copied into its rows of the static cache; the first id's logits [B, V]."""
        import torch
        from transformers import DynamicCache

        logits = []
        for start in range(0, slot.batch, group):
            rows = slice(start, start + group)
            cache = DynamicCache()
            out = self.model(input_ids=ids[rows], attention_mask=attn[rows], position_ids=positions[rows],
                             past_key_values=cache, use_cache=True, logits_to_keep=1)
            logits.append(out.logits[:, -1, :])
            slot.write_rows(rows, slice(0, ids.shape[1]), [(layer.keys, layer.values) for layer in cache.layers])
            del out, cache
        slot.set_filled(ids.shape[1])
        return torch.cat(logits)

    def decode(self, input_ids: Any, attention: Any, max_new_tokens: int, temperature: float, top_p: float,
               row_keys: Any, stop_ids: list[int], should_stop: Callable[[], bool],
               check_rows: Optional[Callable[[Any, int], Any]] = None,
               prefix: Optional[Iterable[list[tuple[Any, Any]]]] = None,
               on_tokens: Optional[Callable[[Any], None]] = None) -> tuple[Any, Any]:
        """(new ids [B, N], their log-probs [B, N]) on the CPU for left-padded `input_ids` [B, W]; N <= max_new_tokens
        (the loop ends once every row has sampled a stop id). `row_keys` [B] int64: mix64 of each row's seed;
        `check_rows(new ids so far [B, t], t)` may return a [B] bool tensor of rows to end (repetition);
        `prefix`: the rows' kept caches (see _prefill; kept_caches.KeptCaches.row_caches); `on_tokens(new ids so
        far [B, t])` is called after the first id, at every check of the rows and at the end (streaming)."""
        import torch

        rows, width = input_ids.shape
        batch = 1 << (rows - 1).bit_length()
        length = -(-(width + max_new_tokens) // CACHE_BUCKET) * CACHE_BUCKET
        ids = torch.cat([input_ids, input_ids[:1].expand(batch - rows, -1)]).to(self.device)
        attn = torch.cat([attention, attention[:1].expand(batch - rows, -1)]).to(self.device)
        slot = self._slot_for(batch, length, stop_ids)
        slot.cache.reset()
        slot.row_keys.zero_()
        slot.row_keys[:rows] = row_keys.to(self.device)
        picker = Picker(temperature, top_p, slot.row_keys)
        positions = (attn.long().cumsum(-1) - 1).clamp(min=0)
        slot.mask.zero_()
        slot.mask[:, :width] = attn.bool()
        logits = self._prefill(slot, ids, attn, positions, prefix)
        slot.step.zero_()
        slot.ended.zero_()
        slot.record(*picker(logits, slot.step[0]))
        del logits
        slot.positions.copy_(positions[:, -1:] + 1)
        slot.column.fill_(width)
        slot.mask[:, width] = True  # the first chosen id's own column
        chosen = fed = 1  # ids recorded so far; ids sent to on_tokens so far
        if on_tokens is not None:
            on_tokens(slot.tokens[:rows, :1])
        with _DecodeAttention(self.model):
            while chosen < max_new_tokens:
                if chosen % CHECK_EVERY == 0 or should_stop():
                    if on_tokens is not None:
                        on_tokens(slot.tokens[:rows, :chosen])
                        fed = chosen
                    if check_rows is not None:
                        flagged = check_rows(slot.tokens[:rows, :chosen], chosen)
                        if flagged is not None:
                            slot.ended[:rows] |= flagged.to(self.device)
                    if should_stop() or bool(slot.ended[:rows].all()):
                        break
                if not self.use_graphs:
                    slot.advance(self.model, picker)
                else:
                    if slot.graph is None or slot.graph_key != (temperature, top_p):
                        self._capture(slot, picker)
                    slot.graph.replay()
                chosen += 1
        self.columns = width + chosen - 1  # the last chosen ids were never run through the model
        if on_tokens is not None and fed < chosen:
            on_tokens(slot.tokens[:rows, :chosen])
        return slot.tokens[:rows, :chosen].cpu(), slot.logprobs[:rows, :chosen].cpu()
