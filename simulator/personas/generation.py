"""LLM persona generation: a spec of what to write, planned into slots, one LLM call per slot, and the checks
every candidate goes through before review.

    spec = load_spec("spec.yaml")                 # GenerationSpec; SpecError names the field
    slots = plan_slots(spec)                      # deterministic: shares -> counts, seeded shuffles
    gen = PersonaGenerator(make_backend("openai:MODEL", base_url=...), threshold=0.9)
    results = asyncio.run(gen.run(slots, Deduper.of(stored_profiles, embed)))

A spec names how many personas to write and, per dimension (needs, personalities, languages, traits, ages,
topics), the values to spread them over, each with an optional target share (a list gives equal shares; a
mapping value -> share; a list item {"value", "share"}). Shares become counts by largest remainder, ties
broken by the seed, and each dimension's values are shuffled with the seed before they are dealt to slots.

Each slot is one chat call through any OpenAI-compatible endpoint (simulator.user.backends, key from the
environment) with the versioned prompt `simulator/prompts/persona_gen/<version>.md` (read and hashed by
simulator.llm.prompting.load_prompt_file) and a JSON schema in `response_format` whose enums pin the slot's category,
personality and language (vLLM decodes under it). An answer that does not parse or does not validate gets
one repair call showing the model its answer and the problem. A valid profile is then checked: validated as
an imported lab record (simulator.personas.io), its first line tested for a leaked hidden need and its lint
warnings counted (simulator.personas.lint), and its persona + background embedded with the offline MiniLM
and compared with the store and the batch: at or above the threshold it is a duplicate, with the nearest
persona and the similarity recorded (recorded for every candidate).
"""
from __future__ import annotations

import asyncio
import math
import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from simulator.llm.client import BackendError
from simulator.llm.traffic import EndpointStopped
from simulator.llm.prompting import fill, load_prompt_file
from simulator.llm.structured import AnswerParseError, ask_structured, json_object
from simulator.personas import lint as persona_lint
from simulator.personas.io import profile_from_lab
from simulator.personas.profile import LANGUAGES, NEED_CATEGORIES, PERSONALITIES, FieldErrors, Profile

PROMPT_DIR = Path(__file__).resolve().parent.parent / "prompts" / "persona_gen"
DEFAULT_PROMPT_VERSION = "v1"
# MiniLM cosine of persona + background at which it is a duplicate
DEFAULT_THRESHOLD = persona_lint.DUPLICATE_SIMILARITY
MAX_COUNT = 500
MAX_VALUE_CHARS = 300
SCHEMA_NAME = "persona_profile"
GENERATED_FIELDS = ("name", "persona", "background", "hidden_need", "need_category", "personality", "language",
                    "traits", "first_line")
# dimension -> (allowed values or None for free text, default values, the slot key it fills)
DIMENSIONS: dict[str, tuple[Optional[Sequence[str]], list[str], str]] = {
    "needs": (tuple(NEED_CATEGORIES), list(NEED_CATEGORIES), "need_category"),
    "personalities": (tuple(PERSONALITIES), list(PERSONALITIES), "personality"),
    "languages": (LANGUAGES, ["en"], "language"),
    "traits": (None, [], "trait"),
    "ages": (None, [], "age"),
    "topics": (None, [], "topic"),
}
PERSONALITY_HINTS = {"negative": "sees the bad side first, quick to feel hurt or irritated",
                     "passive": "holds back, goes along with others, rarely asks for what they want",
                     "avoidant": "deflects, changes the subject, keeps feelings at arm's length"}


class SpecError(FieldErrors):
    """A spec that cannot be planned: `errors` maps field -> problem."""


@dataclass
class GenerationSpec:
    count: int
    seed: int = 0
    # dimension -> [(value, share or None)]; an empty list: the dimension is not asked for
    dims: dict[str, list[tuple[str, Optional[float]]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "seed": self.seed,
                **{d: [{"value": v, "share": s} for v, s in items] for d, items in self.dims.items()}}


# ------------------------------------------------------------------------------------------------ the spec
def _dimension(name: str, raw: Any, errs: dict[str, str]) -> list[tuple[str, Optional[float]]]:
    allowed, default, _ = DIMENSIONS[name]
    if raw is None:
        return [(v, None) for v in default]
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, dict):
        raw = [{"value": k, "share": v} for k, v in raw.items()]
    if not isinstance(raw, list):
        errs[name] = f"must be a list of values or a mapping value -> share, got {type(raw).__name__}"
        return []
    items: list[tuple[str, Optional[float]]] = []
    for i, item in enumerate(raw):
        where = f"{name}[{i}]"
        value, share = (item.get("value"), item.get("share")) if isinstance(item, dict) else (item, None)
        if isinstance(item, dict) and set(item) - {"value", "share"}:
            errs[where] = f"unknown key(s) {', '.join(sorted(map(str, set(item) - {'value', 'share'})))}; " \
                          "use value and share"
        elif not isinstance(value, str) or not value.strip():
            errs[where] = "must be a non-empty text"
        elif len(value) > MAX_VALUE_CHARS:
            errs[where] = f"is {len(value)} characters; the limit is {MAX_VALUE_CHARS}"
        elif allowed is not None and value not in allowed:
            errs[where] = f"unknown value {value!r}; one of {', '.join(allowed)}"
        elif value in [v for v, _ in items]:
            errs[where] = f"{value!r} is listed twice"
        elif share is not None and (isinstance(share, bool) or not isinstance(share, (int, float))
                                    or not 0 < share <= 1):
            errs[f"{name}.{value}"] = f"share must be a number in (0, 1], got {share!r}"
        else:
            items.append((value.strip(), None if share is None else float(share)))
    if not raw and allowed is not None:
        errs[name] = "is empty; leave it out for the default " + ", ".join(default)
    given = [s for _, s in items if s is not None]
    total = sum(given)
    if given and len(given) == len(items) and abs(total - 1) > 1e-6:
        errs[name] = f"the shares sum to {total:g}; with a share for every value they must sum to 1"
    elif given and len(given) < len(items) and total >= 1 - 1e-9:
        errs[name] = f"the shares sum to {total:g}, leaving nothing for the values without a share"
    return items


def spec_from_dict(data: Any) -> GenerationSpec:
    """A GenerationSpec from a parsed YAML/JSON object; SpecError names every bad field."""
    if not isinstance(data, dict):
        raise SpecError({"spec": f"must be a mapping (count, needs, personalities, ...), got {type(data).__name__}"})
    errs: dict[str, str] = {}
    unknown = sorted(set(map(str, data)) - set(DIMENSIONS) - {"count", "seed"})
    if unknown:
        errs["spec"] = f"unknown field(s) {', '.join(unknown)}; known: count, seed, {', '.join(DIMENSIONS)}"
    count, seed = data.get("count"), data.get("seed", 0)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        errs["count"] = f"must be a whole number from 1 to {MAX_COUNT}, got {count!r}"
    if isinstance(seed, bool) or not isinstance(seed, int):
        errs["seed"] = f"must be a whole number, got {seed!r}"
    dims = {name: _dimension(name, data.get(name), errs) for name in DIMENSIONS}
    if errs:
        raise SpecError(errs)
    return GenerationSpec(count=count, seed=seed, dims=dims)


def load_spec(path: Union[str, Path]) -> GenerationSpec:
    """Read a spec file (YAML or JSON); SpecError naming the field (or "file")."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise SpecError({"file": f"{path} cannot be read ({e.strerror or e})"}) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise SpecError({"file": f"{path} is not YAML or JSON ({str(e).splitlines()[0]})"}) from None
    return spec_from_dict(data)


def share_counts(items: Sequence[tuple[str, Optional[float]]], n: int, rng: random.Random) -> list[int]:
    """Counts summing to n in proportion to the shares (values without one split what is left equally);
    largest remainder, ties broken by `rng`."""
    given = sum(s for _, s in items if s is not None)
    free = sum(1 for _, s in items if s is None)
    shares = [s if s is not None else max(0.0, 1 - given) / free for _, s in items]
    exact = [s / sum(shares) * n for s in shares]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(items)), key=lambda i: (-(exact[i] - counts[i]), rng.random()))
    for i in order[:n - sum(counts)]:
        counts[i] += 1
    return counts


def plan_slots(spec: GenerationSpec) -> list[dict[str, Any]]:
    """One dict per persona to write: {"slot", "need_category", "personality", "language", "trait", "age",
    "topic"} (None where the spec does not ask). The same spec always gives the same plan."""
    slots: list[dict[str, Any]] = [{"slot": i} for i in range(spec.count)]
    for name, (_, _, key) in DIMENSIONS.items():
        items = spec.dims.get(name, [])
        rng = random.Random(f"{spec.seed}-{name}")
        values: list[Optional[str]] = [None] * spec.count
        if items:
            values = [v for (v, _), c in zip(items, share_counts(items, spec.count, rng)) for _ in range(c)]
            rng.shuffle(values)
        for slot, value in zip(slots, values):
            slot[key] = value
    return slots


# ------------------------------------------------------------------------------------------------ the call
def slot_messages(slot: dict[str, Any], prompt: dict[str, str], variation: int = 0) -> list[dict[str, str]]:
    extras = [f"- {label}: {slot[key]}" for key, label in (("age", "age"), ("trait", "one of their traits"),
                                                           ("topic", "what weighs on them"))
              if slot.get(key)]
    user = fill(prompt["user"], {"need_category": slot["need_category"],
                                 "need_label": NEED_CATEGORIES[slot["need_category"]][0],
                                 "personality": slot["personality"],
                                 "personality_hint": PERSONALITY_HINTS[slot["personality"]],
                                 "language": slot["language"], "extras": "\n".join(extras),
                                 "variation": str(variation + 1)})
    return [{"role": "system", "content": prompt["system"]}, {"role": "user", "content": user}]


def profile_schema(slot: dict[str, Any]) -> dict[str, Any]:
    """The `response_format` for one slot: the profile fields, with the slot's category, personality and
    language as one-value enums."""
    text = {"type": "string"}
    props = {"name": text, "persona": text, "background": text, "hidden_need": text,
             "need_category": {"type": "string", "enum": [slot["need_category"]]},
             "personality": {"type": "string", "enum": [slot["personality"]]},
             "language": {"type": "string", "enum": [slot["language"]]},
             "traits": {"type": "array", "items": text, "maxItems": 3}, "first_line": text}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": {
        "type": "object", "additionalProperties": False, "required": list(GENERATED_FIELDS), "properties": props}}}


def read_answer(text: str, slot: dict[str, Any], profile_id: str) -> Profile:
    """The profile of an answer, validated as an imported lab record and against the slot; ValueError with
    "field: problem; ..." otherwise."""
    try:
        data = json_object(text)
    except AnswerParseError as e:
        if text.lstrip().startswith("{"):  # an object begun but never closed: usually cut at max_tokens
            raise ValueError(f"the JSON object is incomplete or malformed ({len(text)} characters; was the "
                             "answer cut off at max_tokens?)") from None
        raise ValueError(str(e)) from None
    if not isinstance(data, dict):
        raise ValueError(f"the answer is a JSON {type(data).__name__}, not an object")
    unknown = sorted(set(map(str, data)) - set(GENERATED_FIELDS))
    if unknown:
        raise ValueError(f"unexpected key(s) {', '.join(unknown[:5])}; only {', '.join(GENERATED_FIELDS)}")
    profile, errs = profile_from_lab({**data, "id": profile_id, "source": "generated"})
    for key in ("need_category", "personality", "language"):
        if key in data and data[key] != slot[key] and key not in errs:
            errs[key] = f"is {data[key]!r} but this persona was asked for {slot[key]!r}"
    if errs or profile is None:
        raise ValueError("; ".join(f"{k}: {v}" for k, v in errs.items()))
    return profile


@dataclass
class Candidate:
    """What one slot produced (the store's PersonaCandidate without ids)."""

    slot: dict[str, Any]
    status: str = "invalid"  # pending | invalid | duplicate
    profile: dict[str, Any] = field(default_factory=dict)
    validation_error: str = ""
    lint: list[dict[str, str]] = field(default_factory=list)
    similarity: Optional[float] = None
    nearest_id: str = ""
    raw: str = ""
    attempts: int = 0
    latency_s: float = 0.0
    n_tokens: int = 0
    vector: Optional[np.ndarray] = None  # persona + background embedding, for the batch's dedupe


class Deduper:
    """Nearest persona by MiniLM similarity of persona + background among the store and the batch so far."""

    def __init__(self, embed: persona_lint.Embed, ids: Sequence[str] = (), vectors: Optional[np.ndarray] = None):
        self.embed, self.ids = embed, list(ids)
        self.vectors = vectors if vectors is not None else np.zeros((0, 384), dtype=np.float32)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, profiles: Sequence[Profile], embed: persona_lint.Embed) -> "Deduper":
        vectors = embed([persona_lint.duplicate_text(p) for p in profiles]) if profiles else None
        return cls(embed, [p.id for p in profiles], vectors)

    def claim(self, pid: str, vector: np.ndarray, threshold: float, add: bool = True) -> tuple[str, Optional[float]]:
        """(nearest id, similarity) and, when below `threshold` and `add`, the vector joins the pool (in one
        step, so two near-identical candidates checked at once cannot both pass)."""
        with self._lock:
            nearest, sim = "", None
            if self.ids:
                sims = self.vectors @ vector
                i = int(np.argmax(sims))
                nearest, sim = self.ids[i], float(sims[i])
            if add and (sim is None or sim < threshold):
                self.ids.append(pid)
                self.vectors = np.vstack([self.vectors, vector[None, :]])
            return nearest, sim


class PersonaGenerator:
    """Writes candidates with a chat backend (simulator.user.backends: openai:MODEL, the simulator's client)."""

    def __init__(self, backend: Any, prompt_version: str = DEFAULT_PROMPT_VERSION, json_schema: bool = True,
                 threshold: float = DEFAULT_THRESHOLD, embed: Optional[persona_lint.Embed] = None):
        if not 0 < threshold <= 1:
            raise ValueError(f"dedupe threshold must be in (0, 1], got {threshold}")
        self.backend, self.prompt_version, self.json_schema = backend, prompt_version, json_schema
        self.threshold = threshold
        self.prompt = load_prompt_file(PROMPT_DIR, prompt_version, "persona generation")
        self.embed = embed or persona_lint.default_embed()
        self.settings: dict[str, Any] = {}  # how it was built (endpoint, sampling, ...): recorded on the generation
        self.stopped_by: Optional[EndpointStopped] = None  # the endpoint stopped answering (auth, connection)

    def fingerprint(self) -> dict[str, Any]:
        fp = self.backend.fingerprint()
        return {"backend": fp.get("backend"), "model": fp.get("model"), "endpoint": fp.get("endpoint", ""),
                "sampling": fp.get("sampling", {}), "prompt_version": self.prompt_version,
                "prompt_sha256": self.prompt["sha256"], "response_format": "json_schema" if self.json_schema
                else "none", "dedupe_threshold": self.threshold}

    async def ask(self, slot: dict[str, Any], profile_id: str, variation: int = 0,
                  cancelled: Callable[[], bool] = lambda: False) -> Optional[tuple[Candidate, Optional[Profile]]]:
        """The slot's call and, when its answer does not parse or validate, one repair call. None when
        cancelled before the first call."""
        cand = Candidate(slot=dict(slot))
        messages = slot_messages(slot, self.prompt, variation)
        fmt = profile_schema(slot) if self.json_schema else None

        def repair(answer: str, problem: str) -> list[dict[str, str]]:
            return [{"role": "assistant", "content": answer},
                    {"role": "user", "content": fill(self.prompt["repair"], {"problem": problem})}]

        answer = await ask_structured(self.backend, messages, lambda text: read_answer(text, slot, profile_id),
                                      attempts=2, repair=repair, response_format=fmt, call_errors=(BackendError,),
                                      cancelled=cancelled)
        if answer.stopped == "cancelled" and answer.attempts == 0:
            return None
        cand.attempts, cand.raw = answer.attempts, answer.text
        cand.latency_s, cand.n_tokens = answer.latency_s, answer.n_tokens
        if isinstance(answer.call_error, EndpointStopped):
            self.stopped_by = self.stopped_by or answer.call_error
        if isinstance(answer.call_error, BackendError):
            cand.validation_error = f"the call failed: {answer.call_error.reason}: {answer.call_error}"
            return cand, None
        if answer.problem:
            after = " (after the repair request)" if answer.attempts == 2 else ""
            cand.validation_error = f"{answer.problem}{after}"
            return cand, None
        cand.validation_error = ""
        return cand, answer.value

    def check(self, cand: Candidate, profile: Profile, deduper: Deduper) -> Candidate:
        """Leak, lint and duplicate checks of a valid profile; sets the candidate's status."""
        cand.profile = profile.to_dict()
        warnings = persona_lint.profile_warnings(profile, self.embed)
        cand.lint = [w.to_dict() for w in warnings]
        leak = [w for w in warnings if w.field == "first_line" and "hidden need" in w.problem]
        cand.vector = self.embed([persona_lint.duplicate_text(profile)])[0]
        cand.nearest_id, cand.similarity = deduper.claim(profile.id, cand.vector, self.threshold, add=not leak)
        if leak:
            cand.status, cand.validation_error = "invalid", f"first_line: {leak[0].problem}"
        elif cand.similarity is not None and cand.similarity >= self.threshold:
            cand.status = "duplicate"
        else:
            cand.status = "pending"
        return cand

    async def one(self, slot: dict[str, Any], profile_id: str, deduper: Deduper, variation: int = 0,
                  cancelled: Callable[[], bool] = lambda: False) -> Optional[Candidate]:
        asked = await self.ask(slot, profile_id, variation, cancelled)
        if asked is None:
            return None
        cand, profile = asked
        if profile is None:
            try:  # keep what could be read, for the editor
                data = json_object(cand.raw) if cand.raw else {}
                cand.profile = {k: data[k] for k in GENERATED_FIELDS if k in data} if isinstance(data, dict) else {}
            except AnswerParseError:
                cand.profile = {}
            return cand
        return await asyncio.to_thread(self.check, cand, profile, deduper)

    async def run(self, slots: Sequence[dict[str, Any]], deduper: Deduper, id_of: Callable[[dict], str],
                  on_result: Optional[Callable[[Candidate], None]] = None,
                  cancelled: Callable[[], bool] = lambda: False) -> list[Candidate]:
        """Every slot concurrently, as many at once as the backend's traffic limiter lets calls be in flight
        (so a cancel finds the slots not yet started still waiting); `on_result` sees each candidate as it is
        made; slots not started when `cancelled()` turns true are skipped, and so are they once the endpoint
        stopped (EndpointStopped: a wrong key or no connection), which is then raised: the generation fails."""
        limits = getattr(self.backend, "limits", None)
        at_once = asyncio.Semaphore(max(1, getattr(limits, "max_in_flight", 8)))

        async def go(slot: dict[str, Any]) -> Optional[Candidate]:
            try:
                async with at_once:
                    cand = await self.one(slot, id_of(slot), deduper,
                                          cancelled=lambda: cancelled() or self.stopped_by is not None)
            except Exception as exc:  # a bug or an unexpected client error: this slot only
                cand = Candidate(slot=dict(slot), validation_error=f"{type(exc).__name__}: {str(exc)[:300]}")
            if cand is not None and on_result is not None:
                on_result(cand)
            return cand

        made = [c for c in await asyncio.gather(*(go(s) for s in slots)) if c is not None]
        if self.stopped_by is not None:
            raise self.stopped_by
        return made
