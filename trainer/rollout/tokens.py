"""The token bookkeeping of a dialogue in flight (trainer.rollout.state.DialogueState).

A turn's prompt is built from token ids, never by re-tokenising earlier output:
prompt[t+1] = prompt[t] + kept[t] + ids(template text between the reply and the next assistant header).
Direct mode: kept[t] = the sampled ids, so the whole dialogue is one causal sequence in which every
sampled token sits after exactly the context it was sampled with. Think mode: as in the paper the later
prompts drop earlier thoughts (kept[t] = ids of the visible reply), so a turn's sampled thought is not in
later prompts; the sample then holds one *segment* per turn (its prompt + its sampled ids). Each segment
is a causal sequence of its own; `RolloutSample.rows()` gives them for log-prob recomputation, and
`input_ids` is their concatenation (one segment in direct mode: the dialogue).
"""
from __future__ import annotations

from trainer.policies.base import Generation, PolicyEngine
from trainer.rollout.state import DialogueState

_PLACEHOLDER = "\x00REPLY\x00"


def extend_prompt(engine: PolicyEngine, d: DialogueState, mode: str, system: dict) -> None:
    """Set d.prompt_ids for the next policy turn from the previous prompt and the kept reply ids."""
    if not engine.supports_token_ids:
        return
    if d.last_generation is None:  # first turn: system prompt + opening, rendered once
        d.prompt_ids = engine.encode_chat([system, *d.messages])
        return
    g, reply = d.last_generation, d.messages[-2]["content"]
    # The policy's own history keeps its sampled ids; only a think block removed from it (think mode)
    # makes us encode the visible reply instead.
    keep_sampled = mode == "direct" or (not d.sample.thoughts[-1] and reply == g.text)
    kept = list(g.token_ids) if keep_sampled else engine.encode_text(reply)
    ended = keep_sampled and bool(kept) and kept[-1] == engine.eos_token_id
    d.prompt_ids = d.prompt_ids + kept + engine.encode_text(_between(engine, d.messages, ended))


def _between(engine: PolicyEngine, messages: list[dict], reply_has_eos: bool) -> str:
    """Template text from the end of the last reply to the next assistant header (incl. new user turn)."""
    history = [{"role": "system", "content": "s"}, *messages[:-2], {"role": "assistant", "content": _PLACEHOLDER}]
    before = engine.render(history, add_generation_prompt=False)
    after = engine.render(history + [messages[-1]], add_generation_prompt=True)
    if not after.startswith(before):
        raise RuntimeError("the chat template does not render histories as prefixes of each other")
    text = before[before.rindex(_PLACEHOLDER) + len(_PLACEHOLDER):] + after[len(before):]
    eos_text = engine.tokenizer.eos_token or ""
    if reply_has_eos and eos_text and text.startswith(eos_text):
        text = text[len(eos_text):]
    return text


def add_tokens(engine: PolicyEngine, d: DialogueState, g: Generation) -> None:
    """Append the turn's prompt (as new context) and sampled ids to the sample's token layout."""
    if not engine.supports_token_ids:
        return
    s = d.sample
    prompt = g.prompt_ids or d.prompt_ids
    if d.open_segment and prompt[:len(d.open_segment)] == d.open_segment:
        new_context = prompt[len(d.open_segment):]  # the same causal sequence continues
        seg_start = s.segments.pop()[0]
    else:
        new_context, seg_start = list(prompt), len(s.input_ids)  # a new segment (think mode)
        d.open_segment = []
    s.input_ids += new_context
    s.action_mask += [0] * len(new_context)
    s.old_logprobs += [0.0] * len(new_context)
    s.token_versions += [-1] * len(new_context)
    start = len(s.input_ids)
    s.input_ids += list(g.token_ids)
    s.action_mask += [1] * len(g.token_ids)
    s.old_logprobs += list(g.logprobs)
    s.token_versions += [-1 if g.policy_version is None else g.policy_version] * len(g.token_ids)
    s.turn_spans.append((start, len(s.input_ids)))
    s.segments.append((seg_start, len(s.input_ids)))
    d.open_segment = d.open_segment + new_context + list(g.token_ids)
