"""Reading the simulator LLM's output: the emotion-analysis step, the reply step and the opening.

Real model output drifts from the requested format: fields go missing or come in another order, prose is
wrapped around them, markdown is added, punctuation is full-width ("：", "［"), numbers are written "+5",
"-3", "5分", "Change: [ -4 ]" or "40 -> 35". Everything here is written against that, and a step that
still cannot be read raises ParseError with the reason (the agent then retries with a repair prompt).

Field names follow the SAGE transcripts (`planning` dict of a user turn): content, TargetCompletion,
activity, analyse, change.
"""
from __future__ import annotations

import re
import unicodedata
from typing import Any, Optional


class ParseError(ValueError):
    """The output could not be read; the message says what is missing."""


# Section label -> canonical key. Matched case-insensitively on normalised text.
EMOTION_LABELS: dict[str, str] = {
    "partner's meaning": "content", "partners meaning": "content", "partner meaning": "content",
    "meaning": "content", "content": "content", "what the partner means": "content",
    "npc想要表达的内容": "content", "对方想要表达的内容": "content", "对方的意思": "content",
    "need fit": "TargetCompletion", "fit": "TargetCompletion", "targetcompletion": "TargetCompletion",
    "target completion": "TargetCompletion", "人物对话目的是否达到": "TargetCompletion",
    "对话目的是否达到": "TargetCompletion", "是否贴合隐藏需求": "TargetCompletion", "需求是否贴合": "TargetCompletion",
    "inner activity": "activity", "activity": "activity", "inner thoughts": "activity", "心理活动": "activity",
    "felt reaction": "analyse", "reaction": "analyse", "analyse": "analyse", "feeling": "analyse",
    "feelings": "analyse", "人物对npc回复的感受": "analyse", "对回复的感受": "analyse", "感受": "analyse",
    "emotion change": "change", "change": "change", "emotion delta": "change", "delta": "change",
    "情绪变化": "change", "emotion变化": "change", "情绪值变化": "change", "变化": "change",
}
REPLY_LABELS: dict[str, str] = {
    "plan": "plan", "planning": "plan", "reply plan": "plan", "回复规划": "plan", "规划": "plan",
    "reply": "reply", "message": "reply", "response": "reply", "your message": "reply",
    "回复": "reply", "回复内容": "reply", "opening": "reply", "opening message": "reply", "开场": "reply",
    "开场白": "reply",
    "leave": "leave", "end": "leave", "goodbye": "leave", "是否结束": "leave", "结束": "leave",
}
PLAN_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attitude", ("attitude", "态度")),
    ("goal", ("goal", "目标")),
    ("tone", ("tone", "语气", "风格", "style")),
    ("content", ("content", "内容", "方式")),
)

_BRACKETS = str.maketrans({"【": "[", "】": "]", "〔": "[", "〕": "]", "「": '"', "」": '"', "\u2212": "-",
                           "\u2013": "-", "\u2014": "-", "\uff5e": "~"})
_MARKDOWN = re.compile(r"(\*\*|__|`+)")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])([+-]?)\s*(\d+(?:\.\d+)?)")
_FROM_TO = re.compile(r"(\d+(?:\.\d+)?)\s*(?:->|=>|→|to|到|变为|变成)\s*(\d+(?:\.\d+)?)", re.I)
_NEGATIVE_WORDS = re.compile(r"(下降|降低|减少|减|降|drop|decrease|fall|lower|down|minus|negative)", re.I)
_POSITIVE_WORDS = re.compile(r"(上升|提高|增加|提升|加|rise|increase|up|plus|raise|positive)", re.I)


def normalize(text: str) -> str:
    """NFKC (full-width -> ASCII), unified brackets and dashes, markdown emphasis removed."""
    text = unicodedata.normalize("NFKC", text or "").translate(_BRACKETS)
    text = _MARKDOWN.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _header_regex(labels: dict[str, str]) -> re.Pattern:
    alts = "|".join(re.escape(k) for k in sorted(labels, key=len, reverse=True))
    # optional heading/list marks, optional "[", the label, optional "]" and ":"; a label without brackets
    # or colon counts only when it stands alone on its line (prose that mentions "change" is not a header).
    return re.compile(
        r"^[ \t]*(?:#+[ \t]*)?(?:[-*+>][ \t]*)?(?:\d+[.)、][ \t]*)?"
        rf"(?:\[[ \t]*(?P<b>{alts})[ \t]*\][ \t]*:?|(?P<c>{alts})[ \t]*:|(?P<s>{alts})[ \t]*$)[ \t]*(?P<rest>.*)$",
        re.I | re.M)


_EMOTION_HEADER = _header_regex(EMOTION_LABELS)
_REPLY_HEADER = _header_regex(REPLY_LABELS)


def split_sections(text: str, labels: dict[str, str], header: re.Pattern) -> dict[str, str]:
    """Canonical key -> section body. A key seen twice keeps its first non-empty body."""
    text = normalize(text)
    found: list[tuple[int, int, str, str]] = []
    for m in header.finditer(text):
        label = (m.group("b") or m.group("c") or m.group("s")).lower()
        found.append((m.start(), m.end(), labels[label], m.group("rest")))
    out: dict[str, str] = {}
    for i, (start, end, key, rest) in enumerate(found):
        stop = found[i + 1][0] if i + 1 < len(found) else len(text)
        body = (rest + "\n" + text[end:stop]).strip()
        if body and not out.get(key):
            out[key] = body
        else:
            out.setdefault(key, body)
    return out


def parse_change(text: str) -> Optional[float]:
    """A signed number from a change field: "+5", "-3", "5分", "[ -4 ]", "40 -> 35", "下降5"; None if none."""
    t = normalize(text)
    m = _FROM_TO.search(t)
    if m:
        return float(m.group(2)) - float(m.group(1))
    m = _NUMBER.search(t)
    if not m:
        return None
    value = float(m.group(2))
    if m.group(1) == "-":
        value = -value
    elif not m.group(1):
        before = t[:m.start()]
        if _NEGATIVE_WORDS.search(before) and not _POSITIVE_WORDS.search(before[-6:]):
            value = -value
    return value


def classify_fit(text: str) -> str:
    """'fits' | 'partly' | 'misses' | '' from a TargetCompletion text."""
    t = normalize(text).lower()[:80].strip()
    lead = re.match(r"(fits?|partly|partial|misses|miss|贴合|部分贴合|偏离)\b", t)
    if lead:
        word = lead.group(1)
        return "partly" if word in ("partly", "partial", "部分贴合") else "misses" if word in ("misses", "miss", "偏离") else "fits"
    if re.search(r"partly|partial|somewhat|部分|一定程度", t):
        return "partly"
    if re.search(r"miss|not |doesn't|does not|\bno\b|未|没有|偏离|不贴合|不符合|否", t):
        return "misses"
    if re.search(r"fit|yes|达到|贴合|符合|是", t):
        return "fits"
    return ""


def _strip_label_prefix(body: str) -> str:
    """SAGE values start with their own label ("心理活动]\\n..."): drop such a leftover."""
    return re.sub(r"^[^\n\]]{0,20}\]\s*", "", body).strip() if re.match(r"^[^\n\]]{0,20}\]", body) else body


def parse_emotion(text: str) -> dict[str, Any]:
    """The emotion-analysis step -> {content, TargetCompletion, activity, analyse, change, fit}.

    Only the change is required; missing descriptive fields become "". Raises ParseError."""
    if not text or not text.strip():
        raise ParseError("the emotion step returned an empty answer")
    sections = split_sections(text, EMOTION_LABELS, _EMOTION_HEADER)
    change = parse_change(sections["change"]) if sections.get("change") else None
    if change is None:
        change = _change_fallback(normalize(text))
    if change is None:
        raise ParseError("no emotion change found: expected a section '[Emotion change]' with a signed number")
    out: dict[str, Any] = {k: _strip_label_prefix(sections.get(k, ""))
                           for k in ("content", "TargetCompletion", "activity", "analyse")}
    out["change"] = change
    out["fit"] = classify_fit(out["TargetCompletion"])
    return out


def _change_fallback(text: str) -> Optional[float]:
    """No change section: 'change ... -4' anywhere in prose, or a bare signed number on the last line."""
    m = re.search(r"(?:change|变化|delta)[^\n\d+-]{0,20}([+-]?\s*\d+(?:\.\d+)?)", text, re.I)
    if m:
        return parse_change(m.group(1))
    last = text.strip().splitlines()[-1].strip() if text.strip() else ""
    if re.fullmatch(r"\[?\s*[+-]\s*\d+(?:\.\d+)?\s*(?:分|points?)?\s*\]?", last):
        return parse_change(last)
    return None


def parse_plan(text: str) -> dict[str, str]:
    """Numbered reply planning ("1. Attitude: ...", "1. 回复态度偏向：负面") -> {attitude, goal, tone, content},
    plus SAGE's "Origin:" draft as `draft` and its "Change:" revision list as `revisions` when present."""
    t = normalize(text)
    out: dict[str, str] = {}
    tail = re.split(r"^\s*(Origin|Change)\s*:\s*$", t, flags=re.M | re.I)
    head = tail[0]
    for name, body in zip(tail[1::2], tail[2::2]):
        out["draft" if name.lower() == "origin" else "revisions"] = body.strip()
    items = [i.strip() for i in re.split(r"^\s*(?:\d+[.)、]|[-*])\s*", head, flags=re.M)[1:] if i.strip()]
    leftover: dict[int, str] = {}
    for n, item in enumerate(items):
        m = re.match(r"([^:\n]{1,30}):\s*(.*)", item, re.S)
        label, value = (m.group(1).lower(), m.group(2).strip()) if m else (item.lower(), item)
        hits = [(label.find(w), key) for key, words in PLAN_KEYS if key not in out for w in words if w in label]
        if hits:
            out[min(hits)[1]] = value
        else:
            leftover[n] = value
    if len(items) == len(PLAN_KEYS):  # four numbered points without clear labels: their usual order
        for n, value in leftover.items():
            out.setdefault(PLAN_KEYS[n][0], value)
    return out


def _as_said(text: str, found: str) -> str:
    """The part of the raw `text` that `found` (a section of its normalised copy) came from, so the stored
    message keeps its own punctuation (full-width ，？！ stay as written). The message section is the
    last one of the format: the shortest raw suffix whose normalised form is `found`; else `found`."""
    want = found.strip()
    if not want:
        return found
    raw = text.rstrip()
    for start in range(len(raw) - 1, -1, -1):
        piece = normalize(raw[start:]).strip()
        if piece == want:
            return raw[start:].strip()
        if len(piece) > len(want) + 8:
            break
    return found


def _clean_message(text: str) -> str:
    """Drop wrapping quotes and a speaker prefix ("You:", "我：") around the message."""
    t = text.strip()
    for _ in range(2):
        t = re.sub(r"^(?:you|me|user|我|用户)\s*[:：]\s*", "", t, flags=re.I)
        if len(t) >= 2 and ((t[0] == t[-1] and t[0] in "\"'") or (t[0], t[-1]) == ("“", "”")):
            t = t[1:-1].strip()
    return t


def parse_reply(text: str) -> dict[str, Any]:
    """The reply step (or the opening) -> {planning, plan, reply, leave}. Raises ParseError.

    Without any section headers a short plain answer is taken as the message itself."""
    if not text or not text.strip():
        raise ParseError("the reply step returned an empty answer")
    sections = split_sections(text, REPLY_LABELS, _REPLY_HEADER)
    reply = sections.get("reply", "")
    if not sections:
        plain = normalize(text).strip()
        analysis = split_sections(text, {**EMOTION_LABELS, "reason": "reason"},
                                  _header_regex({**EMOTION_LABELS, "reason": "reason"}))
        if len(analysis) >= 2:  # an emotion-step analysis answered in place of the message
            raise ParseError(f"the reply step returned an analysis ({', '.join(analysis)}), not the user's message")
        if len(plain) <= 800 and "[" not in plain:
            reply = plain
    reply = _clean_message(_as_said(text, reply))
    if not reply:
        raise ParseError("no message found: expected a section '[Reply]' with the user's next message")
    planning = sections.get("plan", "")
    leave_text = sections.get("leave", "").strip().lower()
    leave = bool(re.match(r"(yes|true|y\b|是|结束)", leave_text))
    return {"planning": planning, "plan": parse_plan(planning) if planning else {}, "reply": reply,
            "leave": leave}
