"""Per-dialogue KV caches kept by the transformers engine between a dialogue's turns, found by token prefix."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterator, Optional

MAX_KEPT = 64  # dialogues whose caches are kept (least recently used first out)


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two id lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class KeptCaches:
    """KV caches kept between a dialogue's turns by the transformers engine, so each token is prefilled once.

    After a batch, every row's cache (its prompt plus the sampled ids the model ran) is kept, keyed by those
    ids. A later prompt takes the kept cache with the longest common token prefix: the cache is cropped there
    (DynamicCache.crop) and only the rest of the prompt is run through the model. In direct mode the next
    prompt extends the whole cached sequence; in think mode earlier <think> blocks are dropped from the
    history, so the prefix ends where the last reply began and the visible reply is prefilled again.

    Rows of a batch reach generation with different cached lengths: each row's missing tokens are prefilled on
    its own (no padding). For transformers' generate the rows' caches are left-padded to one width and stacked
    (its starting cache); the static path copies each row into its static cache as it is made (no stacked
    copy). Both then run only the last prompt column, with the batch's left-padding mask.
    A kept cache is tied to the weights it was computed with: the trainer drops them all before an update of
    weights the engine shares and on every push (HFEngine.forget_caches), so they never outlive their weights
    nor sit beside the learner's activations; a change of a weight's storage or in-place version seen at the next
    call drops them too (a safety net for callers that change the weights without saying so)."""

    def __init__(self, model: Any, max_kept: int = MAX_KEPT):
        self.model, self.max_kept = model, max_kept
        self._kept: OrderedDict[int, tuple[list[int], list[tuple[Any, Any]]]] = OrderedDict()
        self._next_key = 0
        self._weights: tuple = ()
        self.prefill_tokens = 0  # prompt tokens run through the model, all calls together (the engine's stats)

    def _check_weights(self) -> None:
        key = tuple((p.data_ptr(), p._version) for p in self.model.parameters())
        if key != self._weights:
            self._kept.clear()
            self._weights = key

    def clear(self) -> None:
        self._kept.clear()

    def _best(self, ids: list[int]) -> tuple[Optional[int], int]:
        best, best_len = None, 0
        for key, (kept_ids, _) in self._kept.items():
            n = common_prefix(kept_ids, ids)
            if n > best_len:
                best, best_len = key, n
        return best, best_len

    def row_caches(self, prompt_ids: list[list[int]]) -> Optional[Iterator[list[tuple[Any, Any]]]]:
        """None when no prompt shares a prefix with a kept cache (each prompt is then counted as prefilled in
        full); else each row's cache of every prompt id but the last, one row at a time: each layer's (keys,
        values) [1, heads, len - 1, dim], the kept cache cropped at the common prefix and the rest of the
        prompt run through the model (counted in prefill_tokens as the row is made)."""
        self._check_weights()
        found = [self._best(ids) for ids in prompt_ids] if self.max_kept else []
        if all(key is None for key, _ in found):
            self.prefill_tokens += sum(len(ids) for ids in prompt_ids)
            return None
        return self._rows(prompt_ids, found)

    def _rows(self, prompt_ids: list[list[int]], found: list[tuple[Optional[int], int]]
              ) -> Iterator[list[tuple[Any, Any]]]:
        import torch
        from transformers import DynamicCache

        for ids, (key, n) in zip(prompt_ids, found):
            n = min(n, len(ids) - 1)  # the last prompt id is run by the decode loop (it gives the first logits)
            cache = DynamicCache()
            if key is not None and n > 0:
                self._kept.move_to_end(key)
                cache = DynamicCache(ddp_cache_data=self._kept[key][1])  # views: the kept tensors stay whole
                cache.crop(n - cache.get_seq_length())  # a negative crop drops that many columns
            else:
                n = 0
            if n < len(ids) - 1:
                self.model(input_ids=torch.tensor([ids[n:-1]], device=self.model.device), past_key_values=cache,
                           use_cache=True, logits_to_keep=1)
            self.prefill_tokens += len(ids) - n
            yield [(layer.keys, layer.values) for layer in cache.layers]

    def prefilled_cache(self, prompt_ids: list[list[int]], width: int) -> Any:
        """A DynamicCache of `width` - 1 left-padded columns holding every prompt but its last id (generate's
        starting cache), or None when no prompt shares a prefix with a kept cache."""
        import torch
        from transformers import DynamicCache

        rows = self.row_caches(prompt_ids)
        if rows is None:
            return None
        rows = list(rows)
        shaped = next((row for row in rows if row), None)  # a one-id prompt has no cache of its own
        if shaped is None:  # one-id prompts only: generate runs them whole
            return None
        stacked = []
        for layer, (k0, v0) in enumerate(shaped):
            keys, values = [], []
            for ids, row in zip(prompt_ids, rows):
                k, v = row[layer] if row else (k0[:, :, :0], v0[:, :, :0])
                pad = width - len(ids)
                keys.append(torch.nn.functional.pad(k, (0, 0, pad, 0)))
                values.append(torch.nn.functional.pad(v, (0, 0, pad, 0)))
            stacked.append((torch.cat(keys), torch.cat(values)))
        return DynamicCache(ddp_cache_data=stacked)

    def keep(self, prompt_ids: list[list[int]], new: Any, lengths: list[int], layers: list[tuple[Any, Any]],
             columns: int, width: int) -> None:
        """Keep each row's cache after a batch: `new` [B, N] sampled ids, `lengths` each row's reply length,
        `layers` each layer's (keys, values) [B, heads, >= columns, dim] over the left-padded batch, of which
        the first `columns` are filled (`width` of them the prompt's)."""
        if not self.max_kept:
            return
        self._check_weights()
        for row, ids in enumerate(prompt_ids):
            pad = width - len(ids)
            seq = list(ids) + new[row, :lengths[row]].tolist()
            end = min(len(seq), columns - pad)
            old, _ = self._best(ids)
            if old is not None and common_prefix(self._kept[old][0], ids) == len(self._kept[old][0]):
                del self._kept[old]  # this dialogue's previous turn: its ids are a prefix of the new ones
            kept = [(keys[row:row + 1, :, pad:pad + end].clone(), values[row:row + 1, :, pad:pad + end].clone())
                    for keys, values in layers]
            self._kept[self._next_key] = (seq[:end], kept)
            self._next_key += 1
            while len(self._kept) > self.max_kept:
                self._kept.popitem(last=False)
