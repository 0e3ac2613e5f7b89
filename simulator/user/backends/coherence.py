"""Coherence of a reply under SmolLM2-135M-Instruct: is it fluent text, and is it an answer to this message?

For a (user message, reply) pair the model gives two numbers, both mean log-likelihoods per reply token:
  fluency  log p(reply | the user's message, in the chat format)   — word order, grammar, sense
  alone    log p(reply | an empty conversation)                      — how likely the text is anyway
and gain = fluency - alone: how much more likely the message makes the reply, i.e. whether the reply is
an answer to *this* message rather than a text that would fit anywhere.

The model (the lab's default policy model, converted once to safetensors by simulator.llm.models) is loaded
once per process and shared by every dialogue; requests of one event-loop tick are scored in one call in a
worker thread (`CoherenceBatcher`), off the event loop. Each sequence is computed on its own token ids with
no padding, so a result never depends on what else was in the batch: the scorer stays deterministic.
Results are cached. Cost: two forward passes per judged reply (about 1 s of CPU time on this lab's 2-core
machine; benchmarks/offline_calibration.py --time measures it).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.llm.embedding import TickBatcher

# Calibrated on tests/data/offline_calibration.jsonl, train-split personas only (benchmarks/offline_calibration.py
# --fit). Below *_BAD a reply is incoherent (gate 0), from *_OK on it is coherent (gate 1), linear in between.
# Fluency: the good rows' lowest value is -4.96 (10th percentile -4.42); shuffled replies sit near -7.4 and
# fluent nonsense near -6.6, so OK is just below the lowest good row and BAD one nat lower.
# Gain: OK at the good rows' 10th percentile (0.10), BAD just below their lowest (-0.08); replies written
# for another persona sit near -0.05.
FLUENCY_BAD, FLUENCY_OK = -6.0, -5.0  # mean log-likelihood per reply token after the user's message
GAIN_BAD, GAIN_OK = -0.1, 0.1  # fluency minus the reply's likelihood with no message before it
MAX_PENALTY = 6.0  # points lost by a fully incoherent reply
POSITIVE = ("need_fit", "warmth", "persona_fit", "engagement")  # the components coherence gates
MAX_CONTEXT_TOKENS = 64  # the user's message, its last tokens kept
MAX_REPLY_TOKENS = 64  # the reply, its first tokens kept (a longer reply is judged on its opening)
CACHE_SIZE = 50_000
_LOCK = threading.Lock()
_MODEL: dict[str, Any] = {}
_CACHE: "OrderedDict[tuple[str, str], float]" = OrderedDict()


def get_scorer() -> tuple[Any, Any]:
    """(tokenizer, model) of SmolLM2-135M-Instruct in eval mode, loaded on first use from the packaged
    GGUF (converted once to the safetensors cache the policy uses; no download)."""
    with _LOCK:
        if not _MODEL:
            import torch
            from transformers import AutoTokenizer

            from simulator.llm.models import default_model_dir, load_causal_lm

            path = default_model_dir()
            _MODEL["tok"] = AutoTokenizer.from_pretrained(path)
            _MODEL["model"] = load_causal_lm(path, dtype=torch.float32).eval()
        return _MODEL["tok"], _MODEL["model"]


def _prefix(context: str | None) -> str:
    if context is None:
        return "<|im_start|>assistant\n"
    return f"<|im_start|>user\n{context}<|im_end|>\n<|im_start|>assistant\n"


def _mean_logprob(tok: Any, model: Any, context: str | None, reply: str) -> float:
    """Mean log-probability per token of `reply` after the chat prefix of `context` (None: no message)."""
    import torch

    prefix = tok(_prefix(context), add_special_tokens=False)["input_ids"]
    if context is not None:  # keep "<|im_start|>user\n" (3 tokens) and the end markers, cut the message's front
        head, tail = prefix[:3], prefix[3:]
        prefix = head + tail[-MAX_CONTEXT_TOKENS:]
    target = tok(reply, add_special_tokens=False)["input_ids"][:MAX_REPLY_TOKENS]
    if not target:
        return 0.0
    ids = torch.tensor([prefix + target])
    with torch.inference_mode():  # logits only where a reply token is predicted
        logits = model(input_ids=ids, logits_to_keep=len(target) + 1).logits[0, :-1].float()
    logp = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(target)[:, None])[:, 0]
    return round(float(logp.mean()), 4)


def coherence_sync(pairs: list[tuple[str, str]]) -> np.ndarray:
    """(n, 2) array: [fluency, alone] for each (user message, reply) pair, in order."""
    tok, model = get_scorer()
    keys = []
    for context, reply in pairs:
        keys += [(context, reply), ("\0", reply)]  # "\0": the reply with no message before it
    with _LOCK:
        missing = list(dict.fromkeys(k for k in keys if k not in _CACHE))
    for key in missing:
        value = _mean_logprob(tok, model, None if key[0] == "\0" else key[0], key[1])
        with _LOCK:
            _CACHE[key] = value
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
    with _LOCK:
        out = [_CACHE[k] if k in _CACHE else _mean_logprob(tok, model, None if k[0] == "\0" else k[0], k[1])
               for k in keys]
    return np.array(out, dtype=np.float64).reshape(-1, 2) if out else np.zeros((0, 2))


@dataclass(frozen=True)
class Verdict:
    """The coherence component: `gate` in [0, 1] scales the positive components, `points` is its own."""
    measure: float
    gate: float
    points: float
    why: str


def _ramp(x: float, bad: float, ok: float) -> float:
    return float(min(1.0, max(0.0, (x - bad) / (ok - bad))))


def judge_coherence(fluency: float, alone: float) -> Verdict:
    """The verdict on a reply from its (fluency, alone) log-likelihoods: coherent only if it is both fluent
    and more likely after this message than without it."""
    gain = fluency - alone
    g_fluent, g_answer = _ramp(fluency, FLUENCY_BAD, FLUENCY_OK), _ramp(gain, GAIN_BAD, GAIN_OK)
    gate = min(g_fluent, g_answer)
    reads = f"it reads at {fluency:.2f} nats a word-piece (fluent from {FLUENCY_OK:.1f})"
    answers = f"what I said changes its likelihood by {gain:+.2f} (an answer to me from {GAIN_OK:+.1f})"
    if gate >= 1.0:
        why = f"a coherent answer: {reads}; {answers}"
    elif g_fluent <= g_answer:
        why = f"it does not read as sense: {reads}"
    else:
        why = f"it is not an answer to what I said: {answers}"
    return Verdict(round(gate, 3), gate, round(-MAX_PENALTY * (1.0 - gate), 2), why)


def gate_positive(comps: dict[str, dict[str, Any]], gate: float) -> None:
    """Scale the positive points of the POSITIVE components by `gate` (in place), saying so in their reason:
    an incoherent reply earns no warmth, need-fit, persona-fit or engagement."""
    if gate >= 1.0:
        return
    for name in POSITIVE:
        c = comps.get(name)
        if c and c["points"] > 0:
            c["points"] = round(c["points"] * gate, 2)
            c["why"] += f" — but it is not a coherent answer, so it counts {gate:.0%}"


class CoherenceBatcher(TickBatcher):
    """Coherence of every dialogue's reply of one event-loop tick, computed in one worker-thread call."""

    def __init__(self) -> None:
        super().__init__(coherence_sync)

    async def score(self, context: str, reply: str) -> tuple[float, float]:
        """(fluency, alone) of `reply` as an answer to `context`."""
        row = (await self.run([(context, reply)]))[0]
        return float(row[0]), float(row[1])
