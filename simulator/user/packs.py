"""Prompt packs: the simulator's prompts, their parsing and the benchmark policy's system prompt, versioned
together and recorded in the simulator fingerprint.

- `own` (default, OwnPack): the lab's own prompts in zh and en (simulator/prompts/own/), written in the
  lab's words but following SAGE's structure step for step: one user message per step, an analyst that
  profiles the person, the conversation goal, five analysis fields and a signed change with no stated range;
  the reply step sees only the tier label, an objective and a subjective analysis, and writes Thinking /
  Origin / Change / Response (a draft, then a more natural rewrite); the user ends with SAGE's end words.
- `sage:DIR` (SagePack): SAGE's own prompts, read from the user's checkout.
- `rlver:DIR` (RlverPack): RLVER's training simulator prompts (hard_player_simulator_dsv3.py).
- `v1`: the lab's earlier prompts (simulator/prompts/v1, rendered by the agent itself), kept for old runs.

The reference packs (`sage:DIR`, `rlver:DIR`) live in simulator/user/reference_packs.py; the lab ships none of
their text. Every pack answers the same small interface (PromptPack): the messages of the emotion and
reply steps, their parsing, and the benchmark policy's system prompt.
"""
from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from simulator.access import current_access
from simulator.llm.prompting import fill
from simulator.user.pack_base import PackError, PromptPack, emotion_text, history_json
from simulator.user.parsing import ParseError, parse_change
from simulator.user.reference_packs import RlverPack, SagePack

OWN_DIR = Path(__file__).resolve().parent.parent / "prompts" / "own"
_CJK = re.compile(r"[\u4e00-\u9fff]")


EMOTION_KEYS = ("Content", "TargetCompletion", "Activity", "Analyse", "Change")
REPLY_KEYS = ("Thinking", "Origin", "Change", "Response")


def _schema(name: str, keys: tuple[str, ...], integer: str = "") -> dict[str, Any]:
    """An OpenAI `response_format` asking for one object with these keys (`integer` one is an integer)."""
    props = {k: {"type": "integer" if k == integer else "string"} for k in keys}
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": {
        "type": "object", "properties": props, "required": list(keys), "additionalProperties": False}}}


class OwnPack(PromptPack):
    """The lab's own prompts (simulator/prompts/own/{zh,en}): SAGE's structure in the lab's words.

    structured=True (spec `own:json`): each step also asks, through `response_format`, for one JSON object
    with the same fields (EMOTION_KEYS / REPLY_KEYS), for endpoints that constrain decoding to a schema
    (vLLM, SGLang, OpenAI); an answer that is not that object is read as text, like the plain pack."""

    kind = "own"
    version = "own-2"

    def __init__(self, structured: bool = False) -> None:
        self.structured = structured
        self.texts: dict[str, dict[str, str]] = {}
        h = hashlib.sha256()
        for path in sorted(OWN_DIR.rglob("*.txt")):
            h.update(str(path.relative_to(OWN_DIR)).encode())
            h.update(path.read_bytes())
        self.sha256 = h.hexdigest()[:16]

    def fingerprint(self) -> dict[str, Any]:
        return {"pack": "own", "version": self.version, "sha256": self.sha256, "structured": self.structured}

    def response_format(self, step: str) -> Optional[dict[str, Any]]:
        if not self.structured:
            return None
        return _schema("emotion_step", EMOTION_KEYS, "Change") if step == "emotion" else \
            _schema("reply_step", REPLY_KEYS)

    @staticmethod
    def _as_sections(text: str, keys: tuple[str, ...]) -> str:
        """A JSON answer with these keys, written out as the labelled text the parser reads (else as is)."""
        try:
            data = json.loads(text)
        except ValueError:
            return text
        if not isinstance(data, dict) or not all(k in data for k in keys):
            return text
        return "\n".join(f"{k}:\n{data[k]}" for k in keys)

    def _texts(self, language: str) -> dict[str, str]:
        if language not in self.texts:
            folder = OWN_DIR / language
            if not folder.is_dir():
                raise PackError(f"own pack: no prompts for language {language!r} (have zh, en)")
            t = {name: (folder / f"{name}.txt").read_text(encoding="utf-8") for name in ("emotion", "reply")}
            for line in (folder / "strings.txt").read_text(encoding="utf-8").splitlines():
                key, sep, value = line.partition("=")
                if sep:
                    t[key.strip()] = value.replace("\\n", "\n")
            self.texts[language] = t
        return self.texts[language]

    @staticmethod
    def language(profile: dict[str, Any]) -> str:
        lang = profile.get("language") or (profile.get("lab") or {}).get("language")
        return lang if lang in ("zh", "en") else ("zh" if _CJK.search(profile.get("player", "")) else "en")

    def policy_system_prompt(self, language: str = "zh") -> str:
        return self._texts(language)["policy_system_prompt"]

    def _common(self, profile: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
        t = self._texts(self.language(profile))
        roles = {"user": t["role_user"], "assistant": t["role_assistant"]}
        return t, {"goal": t["goal"], "player": profile["player"], "scene": profile["scene"], "roles": roles}

    def emotion_messages(self, profile: dict[str, Any], emotion: float, history: list[dict]) -> list[dict]:
        t, v = self._common(profile)
        values = {"goal": v["goal"], "player": v["player"], "scene": v["scene"], "emotion": emotion_text(emotion),
                  "dialog_history": history_json(history, v["roles"])}
        return [{"role": "user", "content": fill(t["emotion"], values, braces=2)}]

    def reply_messages(self, profile: dict[str, Any], emotion: float, history: list[dict],
                       planning: Optional[dict[str, Any]]) -> list[dict]:
        t, v = self._common(profile)
        analysis = (t["objective_label"] + planning["TargetCompletion"] + t["subjective_label"] + planning["activity"]
                    + planning["analyse"]) if planning else t["opening_planning"]
        passive = profile.get("main_cha") in ("被动型", "passive")
        values = {"goal": v["goal"], "player": v["player"], "scene": v["scene"], "emotion": self.label(emotion),
                  "planning": analysis, "question_rule": t["passive_rule"] if passive else "",
                  "dialog_history": history_json(history[:-2], v["roles"]) if history else t["empty_history"],
                  "new_history": history_json(history[-2:], v["roles"]) if history else ""}
        return [{"role": "user", "content": fill(t["reply"], values, braces=2)}]

    def parse_emotion(self, text: str) -> dict[str, Any]:
        return super().parse_emotion(self._as_sections(text, EMOTION_KEYS))

    def change_of(self, text: str) -> int:
        """Any signed number the lab's parser reads ("+5", "-3分", "下降5"); ParseError when none."""
        value = parse_change(text)
        if value is None:
            raise ParseError("no emotion change after 'Change:'")
        return int(round(value))

    def parse_reply(self, text: str) -> dict[str, Any]:
        text = self._as_sections(text, REPLY_KEYS)
        if "Response:" not in text.replace("：", ":"):
            raise ParseError("no 'Response:' section with the user's message")
        return super().parse_reply(text.replace("Response：", "Response:"))


@lru_cache(maxsize=2)
def _own_pack(structured: bool) -> OwnPack:
    """One OwnPack per process (its files are read and hashed once, not once per dialogue)."""
    return OwnPack(structured=structured)


PACK_FORMS = "'own', 'own:json', 'sage:DIR' (a SAGE checkout), 'rlver:DIR' (an RLVER checkout) or 'v1'"


def pack_error(spec: Any) -> str:
    """Why `spec` is not a prompt pack spec ('' when it is one); the folder is read only by load_pack."""
    if isinstance(spec, str) and (spec in ("", "own", "own:json", "v1") or
                                  (spec.partition(":")[0] in ("sage", "rlver") and spec.partition(":")[2].strip())):
        return ""
    return f"unknown prompt pack {spec!r}: use {PACK_FORMS}"


def load_pack(spec: str) -> Optional[PromptPack]:
    """`own` (or "") -> OwnPack; `own:json` -> OwnPack asking for JSON through response_format;
    `sage:DIR` -> SagePack and `rlver:DIR` -> RlverPack (never structured); `v1` -> None (the agent's
    earlier templates)."""
    if spec in ("", "own", "own:json"):
        return _own_pack(spec == "own:json")
    if spec == "v1":
        return None
    kind, _, directory = spec.partition(":")
    if kind in ("sage", "rlver") and directory:
        current_access().path("prompt_pack", directory)  # AccessError before the folder is looked at
        return (SagePack if kind == "sage" else RlverPack)(directory)
    raise PackError(pack_error(spec))
