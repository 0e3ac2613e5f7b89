"""The transformers engine: left-padded batched generation with a KV cache, on CPU or GPU.

Two decode paths (argument `decode`, attribute `decode_path`): "generate", transformers' generate with its
growing cache; "static", the lab's loop over a static cache whose decode step is replayed as a CUDA graph on
GPUs (trainer.policies.static_decode, several times faster there). "auto" (the default) is "static" on CUDA
and "generate" on CPU, where the graph does not exist and generate is no slower; RLVER_HF_DECODE in the
environment overrides "auto". The static path needs the model in eval mode (a model passed in that is
training falls back to generate).

With per-prompt `seeds` (and T > 0) each row is sampled by `_RowSampler` from its own torch.Generator
instead of transformers' one shared random stream, so a row's reply does not depend on its batch mates.

On both paths a dialogue's KV cache is kept between its turns (trainer.policies.kept_caches): a prompt
that extends a kept one runs only its new tokens through the model. `stats["prefill_tokens"]` counts the
prompt tokens run through the model; `keep_kv=0` turns keeping off (every turn prefilled in full)."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Optional

from simulator.llm.models import load_causal_lm
from trainer.policies.base import Generation, PolicyEngine, SamplingConfig, check_prompt_ids
from trainer.policies.kept_caches import MAX_KEPT, KeptCaches
from trainer.policies.repetition import RepetitionStop

log = logging.getLogger(__name__)


DECODE_PATHS = ("generate", "static")


class HFEngine(PolicyEngine):
    """Any local Hugging Face causal-LM folder. `model` may be passed in to share weights with training."""

    name = "transformers"

    def __init__(self, path: str | Path, device: Optional[str] = None, dtype: Any = None,
                 model: Any = None, tokenizer: Any = None, decode: str = "auto", keep_kv: int = MAX_KEPT):
        import os

        import torch
        from transformers import AutoTokenizer

        from trainer.policies.base import resolve_policy

        self.path = resolve_policy(str(path))
        self.model_ref = str(self.path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.path)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if model is None:  # a model passed in belongs to its owner (training): its mode is left alone
            model = load_causal_lm(self.path, dtype=dtype).to(self.device).eval()
        self.model = model
        self._stop_ids = _stop_ids(self.tokenizer, self.model)
        if decode == "auto":
            decode = os.environ.get("RLVER_HF_DECODE") or ("static" if self.device.startswith("cuda") else "generate")
        if decode not in DECODE_PATHS:
            raise ValueError(f"decode: must be one of {', '.join(DECODE_PATHS)} or auto, got {decode!r}")
        self.decode_path = decode
        self._static: Any = None  # trainer.policies.static_decode.StaticDecoder, made on first use
        self.static_error: Optional[str] = None  # why the static path was given up, if it was
        self.kept = KeptCaches(self.model, keep_kv)

    @property
    def stats(self) -> dict[str, int]:
        """Prompt tokens run through the model so far (prefill), all calls together."""
        return {"prefill_tokens": self.kept.prefill_tokens}

    @property
    def context_length(self) -> Optional[int]:
        return getattr(self.model.config, "max_position_embeddings", None)

    @property
    def static_captures(self) -> int:
        """CUDA graphs the static decode path has captured so far (a new batch or cache bucket, new weights)."""
        return self._static.captures if self._static is not None else 0

    @property
    def eos_token_id(self) -> int:
        return self._stop_ids[0]

    def load_weights(self, weights: Any) -> None:
        """Copy new weights into the generation model in place: a state dict, or buckets of (name, tensor) in HF
        names (trainer.policies.weight_stream), each tensor copied as it arrives. An unknown name is an error."""
        import torch

        from trainer.policies.weight_stream import as_buckets

        own = self.model.state_dict()
        with torch.no_grad():
            for bucket in as_buckets(weights):
                for name, tensor in bucket:
                    if name not in own:
                        raise KeyError(f"load_weights: the sampling model has no weight named {name!r}")
                    own[name].copy_(tensor)
        self.forget_caches()

    def forget_caches(self) -> None:
        self.kept.clear()

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> list[Generation]:
        import torch
        from transformers import LogitsProcessorList, StoppingCriteriaList

        if not check_prompt_ids(prompt_ids, params, seeds):
            return []
        pad = self.tokenizer.pad_token_id
        width = max(len(ids) for ids in prompt_ids)
        input_ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
        attention = torch.zeros_like(input_ids)
        for row, ids in enumerate(prompt_ids):  # left padding: every prompt ends at the same column
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            attention[row, width - len(ids):] = 1
        greedy = params.temperature == 0
        if params.seed is not None:
            torch.manual_seed(params.seed)
        if self.decode_path == "static" and not self.model.training:
            try:
                return self._generate_static(prompt_ids, input_ids, attention, params, seeds)
            except RuntimeError as exc:  # e.g. a model whose forward cannot be captured: generate from now on
                self.static_error = repr(exc)[:500]
                self.decode_path, self._static = "generate", None
                log.warning("transformers engine: the static decode path failed (%s); using generate", exc)
        rows = _RowSampler(seeds, params.temperature, params.top_p) if seeds is not None and not greedy else None
        sampling = not greedy and rows is None  # transformers' own sampler (one random stream for the batch)
        stop = _StopOnEvent(self.stop_event) if self.stop_event is not None else None
        loops = RepetitionStop(width, self.repetition_rule) if self.repetition_rule is not None else None
        criteria = [c for c in (stop, loops) if c is not None]
        feed = _TokenFeed(self.token_listener, self._keys(len(prompt_ids)), self._stop_ids) \
            if self.token_listener is not None else None
        with torch.inference_mode():
            cache = self.kept.prefilled_cache(prompt_ids, width)
            out = self.model.generate(streamer=feed, past_key_values=cache,
                stopping_criteria=StoppingCriteriaList(criteria) if criteria else None,
                logits_processor=LogitsProcessorList([rows]) if rows else None,
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                do_sample=sampling, temperature=params.temperature if sampling else None,
                top_p=params.top_p if sampling else None, top_k=0 if sampling else None,
                max_new_tokens=params.max_new_tokens, eos_token_id=self._stop_ids, pad_token_id=pad,
                use_cache=True, return_dict_in_generate=True, output_scores=rows is None,
            )
        new = out.sequences[:, width:].cpu()
        if rows is not None:
            logprobs = torch.stack(rows.logprobs, dim=1) if rows.logprobs else torch.zeros(new.shape)
        else:  # processed scores (temperature and top-p applied) -> log-probs of the sampled ids (base.py)
            scores = torch.stack(out.scores, dim=1).float().cpu()
            logprobs = torch.log_softmax(scores, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results = self._results(prompt_ids, new, logprobs, loops)
        cache = out.past_key_values
        with torch.inference_mode():
            if cache is not None:
                self.kept.keep(prompt_ids, new, [len(g.token_ids) for g in results],
                               [(layer.keys, layer.values) for layer in cache.layers], cache.get_seq_length(), width)
        return results

    def _keys(self, rows: int) -> list[str]:
        """Whose turn each row of the batch is (batch_keys, when the scheduler set them for this batch)."""
        return list(self.batch_keys) if self.batch_keys and len(self.batch_keys) == rows else [""] * rows

    def _generate_static(self, prompt_ids: list[list[int]], input_ids: Any, attention: Any, params: SamplingConfig,
                         seeds: Optional[list[int]]) -> list[Generation]:
        """The static-cache loop (static_decode), continuing from the dialogues' kept caches."""
        import torch

        from trainer.policies.static_decode import StaticDecoder, mix64

        if self._static is None:
            self._static = StaticDecoder(self.model, self.device, use_graphs=self.device.startswith("cuda"))
        if seeds is None:  # one call-wide stream (params.seed, else the global one) draws each row's seed
            seeds = torch.randint(0, 2**62, (len(prompt_ids),)).tolist()
        row_keys = mix64(torch.tensor([int(s) % 2**63 for s in seeds], dtype=torch.int64))
        loops = RepetitionStop(0, self.repetition_rule) if self.repetition_rule is not None else None
        check = None
        if loops is not None and params.max_new_tokens >= loops.rule.window:
            check = lambda new, t: loops(new, None)  # noqa: E731
        stop = self.stop_event
        feed = _TokenFeed(self.token_listener, self._keys(len(prompt_ids)), self._stop_ids).put_rows \
            if self.token_listener is not None else None
        with torch.inference_mode():
            new, logprobs = self._static.decode(
                input_ids, attention, params.max_new_tokens, params.temperature, params.top_p, row_keys,
                self._stop_ids, lambda: stop is not None and stop.is_set(), check,
                prefix=self.kept.row_caches(prompt_ids), on_tokens=feed)
            results = self._results(prompt_ids, new, logprobs, loops)
            self.kept.keep(prompt_ids, new, [len(g.token_ids) for g in results], self._static.filled_layers(),
                           self._static.columns, input_ids.shape[1])
        return results

    def _results(self, prompt_ids: list[list[int]], new: Any, logprobs: Any,
                 loops: Optional[RepetitionStop]) -> list[Generation]:
        """One Generation per prompt: each row cut after its first stop id, or where it fell into a loop."""
        results = []
        for row, ids in enumerate(prompt_ids):
            sampled = new[row].tolist()
            end = next((i + 1 for i, t in enumerate(sampled) if t in self._stop_ids), None)
            finish = "stop" if end is not None else "length"
            looped = loops.fired.get(row) if loops is not None else None
            if looped is not None and (end is None or looped < end):  # stopped in a loop: padded after it
                end, finish = looped, "repetition"
            sampled = sampled[:end] if end is not None else sampled
            results.append(Generation(
                text=self.tokenizer.decode(sampled, skip_special_tokens=True), token_ids=sampled,
                logprobs=logprobs[row, :len(sampled)].tolist(), prompt_ids=list(ids), finish_reason=finish))
        return results


class _RowSampler:
    """A logits processor that samples every row itself: from softmax(logits / T) over the top-p nucleus
    (the same distribution as transformers' temperature and top-p warpers), by the Gumbel-max trick with
    the row's own generator. It returns scores that are 0 at the chosen id and -inf elsewhere, so greedy
    decoding picks it, and keeps each chosen id's log-prob (base.py's convention) in `logprobs`."""

    def __init__(self, seeds: list[int], temperature: float, top_p: float):
        import torch

        self.generators = [torch.Generator().manual_seed(int(s) % 2**63) for s in seeds]
        self.temperature, self.top_p = temperature, top_p
        self.logprobs: list[Any] = []  # per step: [B] log-probs of the chosen ids

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        logits = scores.float() / self.temperature
        if self.top_p < 1.0:
            ordered, order = torch.sort(logits, descending=False)
            outside = ordered.softmax(dim=-1).cumsum(dim=-1) <= 1 - self.top_p
            outside[..., -1:] = False  # the most likely id always stays
            logits = logits.masked_fill(outside.scatter(1, order, outside), float("-inf"))
        logp = torch.log_softmax(logits, dim=-1)
        uniform = torch.stack([torch.rand(logp.shape[-1], generator=g) for g in self.generators])
        gumbel = -torch.log(-torch.log(uniform.clamp(min=1e-20)))
        chosen = (logp + gumbel.to(logp.device)).argmax(dim=-1, keepdim=True)
        self.logprobs.append(logp.gather(-1, chosen)[:, 0].cpu())
        return torch.full_like(scores, float("-inf")).scatter_(1, chosen, 0.0)


class _TokenFeed:
    """A transformers streamer that hands the tokens sampled so far, per row, to a token listener after
    each step (the prompt, which generate puts first, is skipped; a row ends at its first stop id, after
    which generate only pads it)."""

    def __init__(self, listener: Any, keys: list[str], stop_ids: list[int]):
        self.listener, self.keys, self.stop_ids = listener, list(keys), set(stop_ids)
        self.rows: list[list[int]] = [[] for _ in keys]
        self.ended = [False] * len(keys)
        self.prompt_seen = False

    def put(self, value: Any) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        for i, token in enumerate(value.reshape(len(self.rows), -1)[:, -1].tolist()):
            if not self.ended[i]:
                self.ended[i] = int(token) in self.stop_ids
                if not self.ended[i]:
                    self.rows[i].append(int(token))
        self.listener(self.keys, self.rows)

    def end(self) -> None:
        """Nothing to flush: the finished replies come back from generate."""

    def put_rows(self, new: Any) -> None:
        """The static path's feed: every row's ids so far [B, t] at once, each cut at its first stop id."""
        self.rows = []
        for ids in new.tolist():
            end = next((i for i, t in enumerate(ids) if t in self.stop_ids), len(ids))
            self.rows.append(ids[:end])
        self.listener(self.keys, self.rows)


class _StopOnEvent:
    """Stopping criterion: every row is done as soon as `event` is set (Stop pressed)."""

    def __init__(self, event: Any):
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)


def _stop_ids(tokenizer: Any, model: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's EOS first, then any extra EOS of the generation config."""
    ids = [tokenizer.eos_token_id]
    extra = getattr(model.generation_config, "eos_token_id", None)
    for t in (extra if isinstance(extra, list) else [extra]):
        if t is not None and t not in ids:
            ids.append(t)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end not in ids:
        ids.append(im_end)
    return [i for i in ids if i is not None]
