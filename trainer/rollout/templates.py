"""System prompts for the policy (think-then-say and direct, en and zh) and think-block parsing.

Think-then-say: the policy writes `<think>...</think>` and then its reply. The simulated user sees only the
reply, and, as in the paper, earlier turns' thoughts are removed from the history the policy sees in
later turns (the dialogue rollout builds each prompt from the visible replies; see trainer.rollout.tokens).

A reply whose think block is missing or broken is handled by `BAD_THINK_POLICIES`:
- "penalize" (default): the visible text (tags and any unclosed thought removed) is sent to the user, the
  turn is flagged (`format_ok=False`) and the dialogue's reward is reduced by
  `trainer.learning.algorithms.RewardConfig.bad_think_penalty` (0 by default, as in the paper, which had no format penalty);
- "as_reply": the whole text, tags removed, is the reply; nothing is flagged;
- "fail": the dialogue ends at that turn with outcome "error" and a message naming the turn.
"""
from __future__ import annotations

import re

MODES = ("think", "direct")
BAD_THINK_POLICIES = ("penalize", "as_reply", "fail")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

SYSTEM_PROMPTS: dict[tuple[str, str], str] = {
    ("direct", "en"): (
        "You are a warm, attentive conversation partner. The person you are talking with wants to share "
        "something that is weighing on them. Listen closely, respond to what they actually said, and work "
        "out what they really need from you: to be heard, understood, encouraged or advised. Speak "
        "naturally and briefly, like a caring friend, not like a therapist or a list of tips."
    ),
    ("think", "en"): (
        "You are a warm, attentive conversation partner. The person you are talking with wants to share "
        "something that is weighing on them. Before every reply, think privately inside <think></think>: "
        "what did they just say, how are they feeling, what do they seem to need from you right now, and "
        "what would help most. Then, after </think>, write only the reply they will read: natural, brief "
        "and caring, like a friend rather than a therapist. They never see your thoughts."
    ),
    ("direct", "zh"): (
        "你是一个温暖、用心的聊天对象。对方想向你倾诉一些压在心里的事。请认真倾听，回应对方真正说出的内容，"
        "并揣摩对方此刻真正需要什么：被倾听、被理解、被鼓励，还是得到建议。说话要自然、简短，像一个关心对方的朋友，"
        "而不是心理咨询师或建议清单。"
    ),
    ("think", "zh"): (
        "你是一个温暖、用心的聊天对象。对方想向你倾诉一些压在心里的事。每次回复之前，先在<think></think>中私下思考："
        "对方刚才说了什么、情绪如何、此刻最需要你给予什么、怎样回应最有帮助。然后在</think>之后只写出对方会看到的回复："
        "自然、简短、真诚，像朋友而不是咨询师。对方看不到你的思考。"
    ),
}


def system_prompt(mode: str, language: str = "en") -> str:
    """The policy's system prompt for `mode` (think | direct) and `language` (en | zh)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return SYSTEM_PROMPTS[(mode, language if language in ("en", "zh") else "en")]


_TAG = re.compile(r"</?think>")


def split_think(text: str) -> tuple[str, str, bool]:
    """Split `<think>thought</think>reply` into (thought, reply, ok).

    ok is True only for exactly one think block that opens the text (leading whitespace allowed), is
    closed, and is followed by a non-empty reply. Otherwise the pieces are returned as best understood:
    no block -> ("", text, False); unclosed block -> (rest, "", False); stray tags are removed from
    the reply.
    """
    stripped = text.strip()
    n_open, n_close = stripped.count(THINK_OPEN), stripped.count(THINK_CLOSE)
    if n_open == 0 and n_close == 0:
        return "", stripped, False
    if stripped.startswith(THINK_OPEN) and n_open == 1 and n_close == 1:
        thought, _, reply = stripped[len(THINK_OPEN):].partition(THINK_CLOSE)
        reply = reply.strip()
        return thought.strip(), reply, bool(reply)
    if n_close == 0:  # "<think>..." never closed: everything after the tag is thought
        before, _, thought = stripped.partition(THINK_OPEN)
        return thought.strip(), before.strip(), False
    # several or misplaced tags: the thought is what precedes the last close tag, the rest is the reply
    head, _, reply = stripped.rpartition(THINK_CLOSE)
    return _TAG.sub("", head).strip(), _TAG.sub("", reply).strip(), False


def visible_reply(text: str, mode: str, bad_think: str = "penalize") -> tuple[str, str, bool]:
    """(thought, reply the user sees, format_ok) for a policy output in `mode`.

    Direct mode: the whole text, exactly as said, is the reply (only think tags, if any, are removed).
    Think mode: see the module docstring for `bad_think`; "fail" is reported as format_ok=False and left
    to the caller.
    """
    if bad_think not in BAD_THINK_POLICIES:
        raise ValueError(f"bad_think must be one of {', '.join(BAD_THINK_POLICIES)}, got {bad_think!r}")
    if mode == "direct":
        return "", _TAG.sub("", text), True
    thought, reply, ok = split_think(text)
    if ok:
        return thought, reply, True
    if bad_think == "as_reply":
        return "", _TAG.sub("", text).strip(), True
    return thought, reply, False
