"""The social-cognition judge: an LLM behind any OpenAI-compatible endpoint rates a dialogue's assistant 1-5
on five dimensions (empathic depth, core insight, solution crafting, dialogue guidance, style
adaptability), with a short reason each.

    judge = Judge(make_backend("openai:MODEL", base_url=..., temperature=0.0))   # key from OPENAI_API_KEY
    results = asyncio.run(judge.judge_many(dialogues))                           # one JudgeResult each

The prompt is a versioned file, `simulator/prompts/judge/<version>.md` (system part, `=== user ===`, the
user part with {persona} and {dialogue}, `=== repair ===`, the follow-up sent once when an answer cannot
be read). The answer is asked for as a JSON schema through `response_format` (unless the endpoint does not
take one: `json_schema=False`) and parsed leniently (code fences, text around the object, "4/5").
A dialogue whose answer stays unreadable, is a refusal, or whose call fails gets a JudgeResult with
status "error" and the kind and reason; the other dialogues go on. `fingerprint()` (endpoint, model,
temperature, prompt version and sha256, response format) is stored with every result.
"""
from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from simulator.llm.client import BackendError
from simulator.llm.prompting import fill, load_prompt_file
from simulator.llm.structured import AnswerParseError, ask_structured, json_object

DIMENSIONS = ("empathic_depth", "core_insight", "solution_crafting", "dialogue_guidance", "style_adaptability")
DIMENSION_LABELS = {"empathic_depth": "empathic depth", "core_insight": "core insight",
                    "solution_crafting": "solution crafting", "dialogue_guidance": "dialogue guidance",
                    "style_adaptability": "style adaptability"}
PROMPT_DIR = Path(__file__).resolve().parent.parent / "prompts" / "judge"
DEFAULT_PROMPT_VERSION = "v1"
ERROR_KINDS = ("parse", "refusal", "timeout", "empty", "backend")
STOP_POLL_S = 0.2  # how often judge_many asks its `stop` whether to abandon what is left
_REFUSAL = re.compile(r"\b(?:sorry|i can(?:no|'|’)t|i cannot|i am unable|i'm unable|i won't|i will not|"
                      r"not able to (?:help|assist|rate|evaluate))\b", re.I)


@dataclass
class JudgeInput:
    """A dialogue to judge: its store id, visible messages and (optional) the user's situation."""

    dialogue_id: int
    messages: list[dict[str, str]]  # [{"role": "user"|"assistant", "content": str}, ...]
    persona: dict[str, Any] = field(default_factory=dict)  # the profile snapshot (background, hidden need)


@dataclass
class JudgeResult:
    dialogue_id: int
    status: str  # ok | error
    scores: dict[str, int] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    error_kind: str = ""  # one of ERROR_KINDS
    error: str = ""
    raw: str = ""  # the judge's last answer
    attempts: int = 0  # model calls made (1, or 2 with the repair)
    latency_s: float = 0.0
    n_tokens: int = 0

    @property
    def mean(self) -> Optional[float]:
        return sum(self.scores.values()) / len(self.scores) if self.scores else None


# ------------------------------------------------------------------------------------------------ prompt
def load_prompt(version: str = DEFAULT_PROMPT_VERSION) -> dict[str, str]:
    """{'system', 'user', 'repair', 'sha256'} of a judge prompt version (a file in simulator/prompts/judge/)."""
    return load_prompt_file(PROMPT_DIR, version, "judge")


def render_dialogue(messages: Sequence[dict[str, str]]) -> str:
    names = {"user": "User", "assistant": "Assistant"}
    return "\n\n".join(f"{names.get(m.get('role', ''), m.get('role', ''))}: {m.get('content', '')}"
                       for m in messages if m.get("role") in names)


def render_persona(persona: dict[str, Any]) -> str:
    """The user's situation as the simulated user knew it (the assistant never saw it); '' when unknown."""
    parts = [f"{label}: {persona[key]}" for key, label in (("background", "Their situation"),
                                                           ("hidden_need", "What they needed, unsaid"))
             if isinstance(persona.get(key), str) and persona[key].strip()]
    if not parts:
        return ""
    return "Context about the user, which the assistant did not see:\n" + "\n".join(parts) + "\n"


def judge_messages(item: JudgeInput, prompt: dict[str, str]) -> list[dict[str, str]]:
    user = fill(prompt["user"], {"persona": render_persona(item.persona),
                                 "dialogue": render_dialogue(item.messages)})
    return [{"role": "system", "content": prompt["system"]}, {"role": "user", "content": user}]


def response_schema() -> dict[str, Any]:
    """The OpenAI `response_format` asking for the five {score, reason} objects."""
    item = {"type": "object", "additionalProperties": False, "required": ["score", "reason"],
            "properties": {"score": {"type": "integer", "minimum": 1, "maximum": 5}, "reason": {"type": "string"}}}
    return {"type": "json_schema", "json_schema": {
        "name": "social_cognition_scores", "strict": True,
        "schema": {"type": "object", "additionalProperties": False, "required": list(DIMENSIONS),
                   "properties": {d: item for d in DIMENSIONS}}}}


# ------------------------------------------------------------------------------------------------ parsing
def _score(value: Any, dim: str) -> int:
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(\d+(?:\.0+)?)\s*(?:/\s*5)?\s*", value)
        value = float(m.group(1)) if m else value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise AnswerParseError(f"{dim}: score {value!r:.40} is not a whole number")
    if not 1 <= value <= 5:
        raise AnswerParseError(f"{dim}: score {int(value)} is outside 1..5")
    return int(value)


def parse_judgement(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """(scores, reasons) from a judge answer; AnswerParseError naming the problem otherwise. Keys may be
    spelled with spaces, hyphens or capitals; a dimension may be {"score", "reason"} or a bare score."""
    data = json_object(text)
    if isinstance(data, dict) and isinstance(data.get("scores"), dict) and len(data) <= 2:
        data = data["scores"]
    if not isinstance(data, dict):
        raise AnswerParseError(f"the answer is a JSON {type(data).__name__}, not an object")
    found = {re.sub(r"[\s-]+", "_", str(k).strip().lower()): v for k, v in data.items()}
    missing = [d for d in DIMENSIONS if d not in found]
    if missing:
        raise AnswerParseError(f"missing {', '.join(missing)}")
    scores, reasons = {}, {}
    for dim in DIMENSIONS:
        value = found[dim]
        if isinstance(value, dict):
            if "score" not in value:
                raise AnswerParseError(f"{dim}: no score")
            scores[dim], reasons[dim] = _score(value["score"], dim), str(value.get("reason", "")).strip()
        else:
            scores[dim], reasons[dim] = _score(value, dim), ""
    return scores, reasons


def is_refusal(text: str) -> bool:
    """An answer with no JSON object that declines the task."""
    return "{" not in text and bool(_REFUSAL.search(text[:300]))


# ------------------------------------------------------------------------------------------------ the judge
class Judge:
    """Judges dialogues with a chat backend (simulator.user.backends: openai:MODEL, the same client settings)."""

    def __init__(self, backend: Any, prompt_version: str = DEFAULT_PROMPT_VERSION, json_schema: bool = True):
        self.backend, self.prompt_version, self.json_schema = backend, prompt_version, json_schema
        self.prompt = load_prompt(prompt_version)

    def fingerprint(self) -> dict[str, Any]:
        fp = self.backend.fingerprint()
        sampling = fp.get("sampling") or {}
        return {"judge": "social-cognition", "backend": fp.get("backend"), "model": fp.get("model"),
                "endpoint": fp.get("endpoint", ""), "temperature": sampling.get("temperature"),
                "max_tokens": sampling.get("max_tokens"),  # a cap that cuts answers changes the results
                "prompt_version": self.prompt_version, "prompt_sha256": self.prompt["sha256"],
                "response_format": "json_schema" if self.json_schema else "none"}

    async def judge(self, item: JudgeInput) -> JudgeResult:
        """One dialogue; never raises for a bad answer or a failed call (the result carries the error)."""
        result = JudgeResult(item.dialogue_id, "error")
        if not any(m.get("role") == "assistant" and str(m.get("content", "")).strip() for m in item.messages):
            result.error_kind, result.error = "empty", "the dialogue has no assistant message to judge"
            return result
        messages = judge_messages(item, self.prompt)
        fmt = response_schema() if self.json_schema else None

        def repair(answer: str, problem: str) -> list[dict[str, str]]:
            return [{"role": "assistant", "content": answer},
                    {"role": "user", "content": fill(self.prompt["repair"], {"problem": problem})}]

        answer = await ask_structured(self.backend, messages, parse_judgement, attempts=2, repair=repair,
                                      response_format=fmt, parse_errors=(AnswerParseError,),
                                      call_errors=(BackendError,),
                                      stop=lambda text: "refusal" if is_refusal(text) else "")
        result.attempts, result.raw = answer.attempts, answer.text
        result.latency_s, result.n_tokens = answer.latency_s, answer.n_tokens
        if isinstance(answer.call_error, BackendError):
            exc = answer.call_error
            kind = "timeout" if exc.reason == "timeout" else "backend"
            hint = ("; if the endpoint does not take response_format, judge without the JSON schema "
                    "(--no-json-schema)" if exc.reason == "rejected" and fmt is not None else "")
            result.error_kind, result.error = kind, f"{exc.reason}: {exc}{hint}"
        elif answer.stopped == "refusal":
            result.error_kind = "refusal"
            result.error = f"the judge declined: {answer.text.strip()[:200]!r}"
        elif answer.problem:
            after = " after the repair request" if answer.attempts == 2 else ""
            result.error_kind, result.error = "parse", f"unreadable answer{after}: {answer.problem}"
        else:
            (result.scores, result.reasons), result.status = answer.value, "ok"
        return result

    async def judge_many(self, items: Sequence[JudgeInput],
                         on_result: Optional[Callable[[JudgeResult], None]] = None,
                         stop: Optional[Callable[[], bool]] = None) -> list[JudgeResult]:
        """Every dialogue concurrently (the backend bounds the calls in flight); `on_result` sees each result
        as it arrives (to store it at once). Results in the order of `items`. Once `stop()` is true (checked
        every STOP_POLL_S) the dialogues not yet judged are abandoned, calls in flight included, and only
        the results that arrived are returned (on_result never saw the others)."""
        async def one(item: JudgeInput) -> JudgeResult:
            try:
                r = await self.judge(item)
            except Exception as exc:  # a bug or an unexpected client error: this dialogue only
                r = JudgeResult(item.dialogue_id, "error", error_kind="backend",
                                error=f"{type(exc).__name__}: {str(exc)[:300]}")
            if on_result is not None:
                on_result(r)
            return r

        if stop is None:
            return list(await asyncio.gather(*(one(i) for i in items)))
        tasks = [asyncio.ensure_future(one(i)) for i in items]
        pending = set(tasks)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=STOP_POLL_S)
            if pending and stop():
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                break
        return [t.result() for t in tasks if t.done() and not t.cancelled()]
