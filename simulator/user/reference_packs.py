"""Reference prompt packs: `sage:DIR` and `rlver:DIR`, the simulator prompts of a SAGE or RLVER checkout,
used as is (simulator.user.packs holds the pack interface and the lab's own pack).

The lab ships none of their text. It reads the templates from the user's checkout by parsing the source
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simulator.user.pack_base import PackError, PromptPack, emotion_text, field_text, history_json
from simulator.user.parsing import ParseError


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

    def history_json(self, history: list[dict]) -> str:
        return history_json(history, self.roles)

    def _split_history(self, prompt: str, history: list[dict]) -> str:
        """Fill {{dialog_history}} with the earlier messages and {{new_history}} with the latest two (the
        reference code's split); with no history, the empty-dialogue text and nothing."""
        if not history:
            return prompt.replace("{{dialog_history}}", self.empty_history).replace("{{new_history}}", "")
        return prompt.replace("{{dialog_history}}", self.history_json(history[:-2])).replace(
            "{{new_history}}", self.history_json(history[-2:]))



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

    def emotion_messages(self, profile: dict[str, Any], emotion: float, history: list[dict]) -> list[dict]:
        """planning_reply: history is the dialogue up to and including the policy's latest reply."""
        prompt = (self.emotion_template.replace("{{emotion}}", emotion_text(emotion))
                  .replace("{{simulator_role}}", profile["player"]).replace("{{simulator_scene}}", profile["scene"])
                  .replace("{{target}}", self.goal))
        prompt = prompt.replace("{{dialog_history}}", self.history_json(history))
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
        return [{"role": "user", "content": self._split_history(prompt, history)}]



class RlverPack(ReferencePack):
    """`rlver:DIR`: RLVER's released training simulator, hard_player_simulator_dsv3.py (its "eq" goal).

    The released file is not valid Python as a whole (call_api's docstring is not indented), so its
    target_prompt dict and the two methods are cut out as text and each parsed on its own. Differences from
    SAGE that the rendering follows: the emotion step also splits the history into earlier context and the
    latest two messages; its analysis has a Reason field (the reply step's objective analysis) instead of
    TargetCompletion; the reply step fills the profile after the history; changes are not clamped."""

    kind = "rlver"
    filename = "hard_player_simulator_dsv3.py"

    def __init__(self, directory: str):
        super().__init__(directory)
        path = self.directory / self.filename
        if not path.is_file():
            raise PackError(f"{path}: file not found")
        data = path.read_bytes()
        self.sources[self.filename] = hashlib.sha256(data).hexdigest()
        text = data.decode("utf-8")
        self.goal = self._targets(path, text).get("eq")
        if not isinstance(self.goal, str):
            raise PackError(f"{path}: target_prompt has no 'eq' goal")
        plan_fn, reply_fn = self._method(path, text, "planning_reply"), self._method(path, text, "player_reply")
        self.emotion_template = _text(plan_fn, _assigned(plan_fn, plan_fn.tree, "template", "the emotion template"),
                                      "planning_reply's template")
        self.reply_template = _text(reply_fn, _assigned(reply_fn, reply_fn.tree, "template", "the reply template"),
                                    "player_reply's template")
        _require_slots(plan_fn, self.emotion_template, ("{{target}}", "{{player_type}}", "{{player_topic}}",
                                                        "{{emotion}}", "{{dialog_history}}"), "emotion-analysis")
        _require_slots(reply_fn, self.reply_template, ("{{target}}", "{{planning}}", "{{emotion}}",
                                                       "{{player_type}}", "{{player_topic}}", "{{dialog_history}}",
                                                       "{{new_history}}"), "reply")
        self.roles = _roles(reply_fn, reply_fn.tree)
        self.opening_planning = _text(reply_fn, _assigned(reply_fn, reply_fn.tree, "planning['analyse']",
                                                          "the opening's analysis"), "the opening's analysis")
        labels = SagePack._planning_chain(reply_fn, reply_fn.tree)
        if len(labels) != 2:
            raise PackError(f"{path}: the objective / subjective analysis labels of player_reply not found")
        self.objective_label, self.subjective_label = labels
        self.empty_history = _text(reply_fn, _replacement(reply_fn, reply_fn.tree, "{{dialog_history}}",
                                                          "the empty-dialogue text"), "the empty-dialogue text")

    @staticmethod
    def _targets(path: Path, text: str) -> dict[str, Any]:
        start = text.find("target_prompt = {")
        if start < 0:
            raise PackError(f"{path}: target_prompt = {{...}} not found")
        brace = text.index("{", start)
        for end in (i for i, ch in enumerate(text) if ch == "}" and i > brace):
            try:
                value = ast.literal_eval(text[brace:end + 1])
            except (SyntaxError, ValueError):
                continue
            if isinstance(value, dict):
                return value
        raise PackError(f"{path}: target_prompt is not a dict literal")

    @staticmethod
    def _method(path: Path, text: str, name: str) -> _Source:
        start = text.find(f"    def {name}(")
        if start < 0:
            raise PackError(f"{path}: method {name}() not found")
        end = text.find("\n    def ", start + 1)
        chunk = "class _Method:\n" + text[start:end if end > 0 else len(text)]  # the method as written
        try:
            tree = ast.parse(chunk)
        except SyntaxError as e:
            raise PackError(f"{path}: method {name}() is not readable Python ({e})") from None
        return _Source(path, tree, "")

    def policy_system_prompt(self, language: str = "zh") -> str:
        raise PackError("rlver pack: RLVER trains with its own policy prompts; use it for the simulator only")

    def emotion_messages(self, profile: dict[str, Any], emotion: float, history: list[dict]) -> list[dict]:
        prompt = (self.emotion_template.replace("{{emotion}}", emotion_text(emotion))
                  .replace("{{player_type}}", profile["player"]).replace("{{player_topic}}", profile["scene"])
                  .replace("{{target}}", self.goal))
        return [{"role": "user", "content": self._split_history(prompt, history)}]

    def reply_messages(self, profile: dict[str, Any], emotion: float, history: list[dict],
                       planning: Optional[dict[str, Any]]) -> list[dict]:
        if not planning:
            prompt = self.reply_template.replace("{{planning}}", self.opening_planning)
        else:
            prompt = self.reply_template.replace("{{planning}}", self.objective_label + planning["reason"]
                                                 + self.subjective_label + planning["analyse"])
        prompt = self._split_history(prompt.replace("{{target}}", self.goal).replace("{{emotion}}",
                                                                                  self.label(emotion)), history)
        prompt = prompt.replace("{{player_type}}", profile["player"]).replace("{{player_topic}}", profile["scene"])
        return [{"role": "user", "content": prompt}]

    def parse_emotion(self, text: str) -> dict[str, Any]:
        t = text.replace("：", ":").replace("*", "")
        field = lambda a, b: field_text(t, a, b).replace("\n\n", "\n")
        change = t.split("Change:")[-1].strip("\n")
        line = change.split("\n")[-1] if "变化" in change else change.split("\n")[0]
        try:
            value = int(line.strip("[").strip("]").strip("“").strip("”"))
        except ValueError:
            raise ParseError(f"the Change field is not an integer: {line[:40]!r}") from None
        return {"content": field("Content:", "Reason:\n"), "reason": field("Reason:", "Activity:\n"),
                "activity": field("Activity:", "Analyse:\n"), "analyse": field("Analyse:", "Change:\n"),
                "TargetCompletion": field("Reason:", "Activity:\n"), "change": value}

    @staticmethod
    def parse_reply(text: str) -> dict[str, Any]:
        out = PromptPack.parse_reply(text)
        return {**out, "planning": out["planning"].replace("\n\n", "\n")}
