"""The prompt pack interface (PromptPack) and the small text helpers every pack shares.

A pack is the simulator's prompts, their parsing and the benchmark policy's system prompt, versioned
together; simulator/user/packs.py holds the lab's own pack and `load_pack`, simulator/user/reference_packs.py
the packs read from a SAGE or RLVER checkout.
"""
from __future__ import annotations

import json
import re
from typing import Any

from simulator.user.parsing import ParseError
from simulator.user.rules import tier


class PackError(ValueError):
    """A prompt pack that cannot be read; the message names the file and what was not found."""


def emotion_text(x: float) -> str:
    """An emotion as the reference code prints it (an int: 40, not 40.0)."""
    return str(int(x)) if float(x).is_integer() else str(x)


def field_text(text: str, start: str, end: str) -> str:
    return text.split(start)[-1].split(end)[0].strip("\n").strip("[").strip("]")


def history_json(history: list[dict], roles: dict[str, str]) -> str:
    """History as SAGE shows it: a JSON list of {role, content}, indent 2, non-ASCII kept."""
    return json.dumps([{"role": roles[m["role"]], "content": m["content"]} for m in history],
                      ensure_ascii=False, indent=2)


class PromptPack:
    """What every pack does: the messages of the emotion and reply steps, their parsing, the policy prompt.

    `profile` is a dict with RLVER/SAGE keys (player, scene, main_cha; `language` when known); `history`
    is [{role: user|assistant, content}] up to and including the policy's latest reply."""

    kind = ""
    repairs = False  # on an unreadable answer ask the same prompt again (SAGE's way), no repair prompt

    def fingerprint(self) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def label(self, emotion: float) -> str:
        """The tier label the reply step shows (Emotion-S/A/B/C/F)."""
        return f"Emotion-{tier(emotion)}"

    @staticmethod
    def parse_reply(text: str) -> dict[str, Any]:
        thinking = text.split("Response:")[0].split("Thinking:\n")[-1].strip("\n").strip("[").strip("]")
        reply = text.split("Response:")[-1].strip("\n").strip("[").strip("]").strip("“").strip("”")
        return {"reply": reply, "planning": thinking}

    def change_of(self, text: str) -> int:
        """The first signed integer of the Change field (ParseError when there is none)."""
        found = re.findall(r"[+-]?\d+", text)
        if not found:
            raise ParseError("no signed integer after 'Change:'")
        return int(found[0])

    def parse_emotion(self, text: str) -> dict[str, Any]:
        """SAGE's parsing: the five fields and the change read from what follows "Change:"."""
        t = text.replace("：", ":").replace("*", "")
        return {"activity": field_text(t, "Activity:", "Analyse:\n"),
                "TargetCompletion": field_text(t, "TargetCompletion:", "Activity:\n"),
                "content": field_text(t, "Content:", "TargetCompletion:\n"),
                "analyse": field_text(t, "Analyse:", "Change:\n"),
                "change": self.change_of(t.split("Change:")[-1].strip("\n").strip("[").strip("]"))}
