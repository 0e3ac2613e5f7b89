"""Prompt packs: the simulator's prompts, their parsing and the benchmark policy's system prompt, versioned
together and recorded in the simulator fingerprint.

- `own` (default, OwnPack): the lab's own prompts in zh and en (simulator/prompts/own/), written in the
  lab's words but following SAGE's structure step for step: one user message per step, an analyst that
  profiles the person, the conversation goal, five analysis fields and a signed change with no stated range;
  the reply step sees only the tier label, an objective and a subjective analysis, and writes Thinking /
  Origin / Change / Response (a draft, then a more natural rewrite); the user ends with SAGE's end words.
- `sage:DIR` (SagePack): SAGE's own prompts, read from the user's checkout.
- `v1`: the lab's earlier prompts (simulator/prompts/v1, rendered by the agent itself), kept for old runs.

The lab ships none of SAGE's text. It reads the templates from the user's checkout by parsing the source
(`ast`, never executing it): from SAGE's simulator_response.py the conversation-goal text, the two
templates (emotion analysis in `planning_reply`, reply in `player_reply`) and the short strings
`player_reply` splices in; from npc_response.py the benchmark policy's system prompt; from RLVER's
hard_player_simulator_dsv3.py the same pieces of its training simulator ("eq" goal). The sha256 of
every file read is part of the fingerprint. Rendering and parsing then follow the reference code step
for step, so the chat messages are byte-identical to what its functions build:
- each step is ONE user message, the template with its `{{...}}` slots replaced in the code's order;
- history is JSON (indent 2, ensure_ascii off) with roles 你 / NPC; the reply step (and RLVER's emotion
  step) splits it into the earlier context and the latest two messages;
- the emotion step gets the emotion number, the reply step only its tier label (Emotion-S/A/B/C/F);
- the change is the first signed integer after "Change:" (the rules clamp it), the reply what follows
  "Response:". A file whose structure differs raises PackError naming what was not found.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simulator.parsing import ParseError, parse_change
from simulator.rules import tier


class PackError(ValueError):
    """A prompt pack that cannot be read; the message names the file and what was not found."""


@dataclass(frozen=True)
class _Source:
    path: Path
    tree: ast.Module
    sha256: str


def _read(path: Path) -> _Source:
    if not path.is_file():
        raise PackError(f"{path}: file not found")
    data = path.read_bytes()
    try:
        tree = ast.parse(data.decode("utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError) as e:
        raise PackError(f"{path}: not readable Python source ({e})") from None
    return _Source(path, tree, hashlib.sha256(data).hexdigest())


def _function(src: _Source, name: str) -> ast.FunctionDef:
    for node in ast.walk(src.tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise PackError(f"{src.path}: function {name}() not found")


def _assigned(src: _Source, scope: ast.AST, target: str, what: str) -> ast.expr:
    """The value assigned to the name `target` (or the subscript `target[...]`) inside `scope`."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Name) and t.id == target) or \
                        (isinstance(t, ast.Subscript) and ast.unparse(t) == target):
                    return node.value
    raise PackError(f"{src.path}: {what} ({target} = ...) not found")


def _text(src: _Source, node: ast.expr, what: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise PackError(f"{src.path}: {what} is not a string literal")


def _replacement(src: _Source, scope: ast.AST, slot: str, what: str) -> ast.expr:
    """The second argument of the first `.replace(slot, X)` call inside `scope`."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
                and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) and node.args[0].value == slot:
            return node.args[1]
    raise PackError(f"{src.path}: {what} (.replace({slot!r}, ...)) not found")


def _string_parts(node: ast.expr) -> list[str]:
    """The string literals of a `+` chain, in order."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string_parts(node.left) + _string_parts(node.right)
    return [node.value] if isinstance(node, ast.Constant) and isinstance(node.value, str) else []


def _require_slots(src: _Source, template: str, slots: tuple[str, ...], what: str) -> None:
    missing = [s for s in slots if s not in template]
    if missing:
        raise PackError(f"{src.path}: the {what} template has no {', '.join(missing)} slot")


def _roles(src: _Source, scope: ast.AST) -> dict[str, str]:
    value = _assigned(src, scope, "mapping", "the role names")
    try:
        roles = ast.literal_eval(value)
    except ValueError:
        roles = None
    if not isinstance(roles, dict) or set(roles) != {"user", "assistant"}:
        raise PackError(f"{src.path}: the role names (mapping = {{'user': ..., 'assistant': ...}}) not found")
    return roles


def _num(x: float) -> str:
    """An emotion as the reference code prints it (an int: 40, not 40.0)."""
    return str(int(x)) if float(x).is_integer() else str(x)


def _field(text: str, start: str, end: str) -> str:
    return text.split(start)[-1].split(end)[0].strip("\n").strip("[").strip("]")


def _json(history: list[dict], roles: dict[str, str]) -> str:
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
        return {"activity": _field(t, "Activity:", "Analyse:\n"),
                "TargetCompletion": _field(t, "TargetCompletion:", "Activity:\n"),
                "content": _field(t, "Content:", "TargetCompletion:\n"),
                "analyse": _field(t, "Analyse:", "Change:\n"),
                "change": self.change_of(t.split("Change:")[-1].strip("\n").strip("[").strip("]"))}


class ReferencePack(PromptPack):
    """A reference checkout's prompts, rendered and parsed as its code does (see the module docstring)."""

    def __init__(self, directory: str):
        self.directory = Path(directory).expanduser()
        if not self.directory.is_dir():
            raise PackError(f"{self.kind}:{directory}: directory not found")
        self.sources: dict[str, str] = {}

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.directory}"

    def _load(self, filename: str) -> _Source:
        src = _read(self.directory / filename)
        self.sources[filename] = src.sha256
        return src

    def fingerprint(self) -> dict[str, Any]:
        return {"pack": self.kind, "files_sha256": dict(sorted(self.sources.items()))}



class SagePack(ReferencePack):
    """`sage:DIR`: SAGE's simulator_response.py and npc_response.py."""

    kind = "sage"

    def __init__(self, directory: str):
        super().__init__(directory)
        sim = self._load("simulator_response.py")
        self.goal = _text(sim, _assigned(sim, sim.tree, "target_prompt", "the conversation goal"), "target_prompt")
        plan_fn, reply_fn = _function(sim, "planning_reply"), _function(sim, "player_reply")
        self.emotion_template = _text(sim, _assigned(sim, plan_fn, "template", "the emotion-analysis template"),
                                      "planning_reply's template")
        self.reply_template = _text(sim, _assigned(sim, reply_fn, "template", "the reply template"),
                                    "player_reply's template")
        _require_slots(sim, self.emotion_template, ("{{target}}", "{{simulator_role}}", "{{simulator_scene}}",
                                                    "{{emotion}}", "{{dialog_history}}"), "emotion-analysis")
        _require_slots(sim, self.reply_template, ("{{target}}", "{{planning}}", "{{emotion}}", "{{player_type}}",
                                                  "{{player_topic}}", "{{dialog_history}}", "{{new_history}}"),
                       "reply")
        self.roles = _roles(sim, reply_fn)
        self.opening_planning = _text(sim, _assigned(sim, reply_fn, "planning['analyse']", "the opening's analysis"),
                                      "the opening's analysis")
        labels = self._planning_chain(sim, reply_fn)
        if len(labels) != 2:
            raise PackError(f"{sim.path}: the objective / subjective analysis labels of player_reply not found")
        self.objective_label, self.subjective_label = labels
        self.empty_history = _text(sim, _replacement(sim, reply_fn, "{{dialog_history}}", "the empty-dialogue text"),
                                   "the empty-dialogue text")
        npc = self._load("npc_response.py")
        self.system_prompt = _text(npc, _assigned(npc, _function(npc, "call_npc"), "role_system",
                                                  "the policy system prompt"), "role_system")

    @staticmethod
    def _planning_chain(src: _Source, fn: ast.FunctionDef) -> list[str]:
        """The literals of the `.replace("{{planning}}", A + ... + B + ...)` call that has a `+` chain."""
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "replace" \
                    and len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value == "{{planning}}" and isinstance(node.args[1], ast.BinOp):
                return _string_parts(node.args[1])
        return []

    def policy_system_prompt(self, language: str = "zh") -> str:
        return self.system_prompt

    def _json(self, history: list[dict]) -> str:
        return _json(history, self.roles)

    def emotion_messages(self, profile: dict[str, Any], emotion: float, history: list[dict]) -> list[dict]:
        """planning_reply: history is the dialogue up to and including the policy's latest reply."""
        prompt = (self.emotion_template.replace("{{emotion}}", _num(emotion))
                  .replace("{{simulator_role}}", profile["player"]).replace("{{simulator_scene}}", profile["scene"])
                  .replace("{{target}}", self.goal))
        prompt = prompt.replace("{{dialog_history}}", self._json(history))
        return [{"role": "user", "content": prompt}]

    def reply_messages(self, profile: dict[str, Any], emotion: float, history: list[dict],
                       planning: Optional[dict[str, Any]]) -> list[dict]:
        """player_reply: `emotion` is the new emotion (shown as its tier label); planning None = opening."""
        if not planning:
            prompt = self.reply_template.replace("{{planning}}", self.opening_planning)
        else:
            prompt = self.reply_template.replace(
                "{{planning}}", self.objective_label + planning["TargetCompletion"] + self.subjective_label
                + planning["activity"] + planning["analyse"])
        prompt = (prompt.replace("{{target}}", self.goal).replace("{{emotion}}", self.label(emotion))
                  .replace("{{player_type}}", profile["player"]).replace("{{player_topic}}", profile["scene"]))
        if not history:
            prompt = prompt.replace("{{dialog_history}}", self.empty_history).replace("{{new_history}}", "")
        else:
            prompt = prompt.replace("{{dialog_history}}", self._json(history[:-2])).replace(
                "{{new_history}}", self._json(history[-2:]))
        return [{"role": "user", "content": prompt}]



OWN_DIR = Path(__file__).resolve().parent / "prompts" / "own"
_SLOT = re.compile(r"\{\{(\w+)\}\}")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _fill(template: str, values: dict[str, str]) -> str:
    """Fill every {{slot}} in one pass (inserted text is never scanned again, unlike chained replaces)."""
    return _SLOT.sub(lambda m: values.get(m.group(1), m.group(0)), template)


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
        values = {"goal": v["goal"], "player": v["player"], "scene": v["scene"], "emotion": _num(emotion),
                  "dialog_history": _json(history, v["roles"])}
        return [{"role": "user", "content": _fill(t["emotion"], values)}]

    def reply_messages(self, profile: dict[str, Any], emotion: float, history: list[dict],
                       planning: Optional[dict[str, Any]]) -> list[dict]:
        t, v = self._common(profile)
        analysis = (t["objective_label"] + planning["TargetCompletion"] + t["subjective_label"] + planning["activity"]
                    + planning["analyse"]) if planning else t["opening_planning"]
        passive = profile.get("main_cha") in ("被动型", "passive")
        values = {"goal": v["goal"], "player": v["player"], "scene": v["scene"], "emotion": self.label(emotion),
                  "planning": analysis, "question_rule": t["passive_rule"] if passive else "",
                  "dialog_history": _json(history[:-2], v["roles"]) if history else t["empty_history"],
                  "new_history": _json(history[-2:], v["roles"]) if history else ""}
        return [{"role": "user", "content": _fill(t["reply"], values)}]

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


def load_pack(spec: str) -> Optional[PromptPack]:
    """`own` (or "") -> OwnPack; `own:json` -> OwnPack asking for JSON through response_format;
    `sage:DIR` -> SagePack (never structured); `v1` -> None (the agent's earlier templates)."""
    if spec in ("", "own", "own:json"):
        return OwnPack(structured=spec == "own:json")
    if spec == "v1":
        return None
    kind, _, directory = spec.partition(":")
    if kind == "sage" and directory:
        return SagePack(directory)
    raise PackError(f"unknown prompt pack {spec!r}: use 'own', 'sage:DIR' (a SAGE checkout) or 'v1'")
