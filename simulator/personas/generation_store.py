"""Persona generations in the store: run one (recorded as it goes), review its candidates (accept, edit then
accept, reject, regenerate one). The app runs a generation as a job of kind "personas" (its process calls
`run_generation_job`: owner lock, heartbeat, Cancel and resume as for training; trainer.jobs.queue): the job's
status, not this row's, says whether it is alive, and a resume makes only the slots not yet made.

A generation row records the endpoint host, model, prompt version and hash, the spec, the settings
(threshold, sampling, response format, base URL and the name of the key's environment variable, never the
key), its status and progress; each slot's candidate is stored as soon as it is made, so a cancelled or
failed generation keeps what it made. Accepting stores an ordinary persona (a fresh id from its name,
source "generated") whose `extra` holds `generation_id` and `candidate_id`.
"""
from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any, Callable, Optional

from sqlalchemy import Engine, select

from simulator.llm.openai_client import OpenAIBackend
from simulator.personas import store as persona_store
from simulator.personas.generation import (
    Candidate,
    Deduper,
    GenerationSpec,
    PersonaGenerator,
    plan_slots,
    spec_from_dict,
)
from simulator.personas.profile import Profile, ProfileError
from storage import (
    Persona,
    PersonaCandidate,
    PersonaGeneration,
    as_dict,
    code_version,
    get_or_raise,
    read_scope,
    session_scope,
)
from storage.models import utcnow

STATUSES = ("pending", "accepted", "rejected", "invalid", "duplicate")
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def make_generator(base_url: str, model: str, api_key_env: str = DEFAULT_KEY_ENV, threshold: Optional[float] = None,
                   temperature: float = 0.9, max_tokens: int = 900, max_in_flight: int = 4, timeout: float = 120.0,
                   json_schema: bool = True, prompt_version: str = "v1", max_retries: int = 2) -> PersonaGenerator:
    """A generator on an OpenAI-compatible endpoint; from the command line the key is read from the
    environment variable `api_key_env` (an unset variable: no key, as local servers take). From the web
    `base_url` names one of the owner's endpoints and the key is that endpoint's (simulator.endpoints)."""
    if not model:
        raise ValueError("model: required (the model name the endpoint serves)")
    backend = OpenAIBackend(model, base_url=base_url, api_key=os.environ.get(api_key_env, ""),
                            temperature=temperature, max_tokens=max_tokens, max_in_flight=max_in_flight,
                            timeout=timeout, max_retries=max_retries)
    kw = {} if threshold is None else {"threshold": threshold}
    gen = PersonaGenerator(backend, prompt_version=prompt_version, json_schema=json_schema, **kw)
    # the URL the caller's Access resolved (an owner's endpoint named from the web): a resume, from the web or
    # the command line, calls the same endpoint
    gen.settings = {"base_url": backend.base_url, "api_key_env": api_key_env, "temperature": temperature,
                    "max_tokens": max_tokens, "max_in_flight": max_in_flight, "timeout": timeout,
                    "json_schema": json_schema, "prompt_version": prompt_version, "max_retries": max_retries,
                    "threshold": gen.threshold}
    return gen


def _candidate_id(generation_id: int, slot: dict) -> str:
    return f"gen{generation_id}-{slot['slot']}"


def generator_for(g: dict[str, Any]) -> PersonaGenerator:
    """The generator a stored generation was made with, rebuilt from its recorded settings."""
    settings = {k: v for k, v in g["settings"].items() if k != "fingerprint"}
    return make_generator(model=g["model"], **settings)


def create_generation(store: Engine, spec: GenerationSpec, gen: PersonaGenerator, status: str = "running") -> int:
    """Record a generation (status "queued" when a job will run it); its id."""
    fp = gen.fingerprint()
    with session_scope(store) as s:
        row = PersonaGeneration(endpoint=fp["endpoint"], model=fp["model"] or "", prompt_version=fp["prompt_version"],
                                prompt_sha256=fp["prompt_sha256"], spec=spec.to_dict(),
                                settings={**gen.settings, "fingerprint": fp}, status=status,
                                n_planned=spec.count, seed=spec.seed, code_version=code_version())
        s.add(row)
        s.flush()
        return row.id


def _fill_row(row: PersonaCandidate, cand: Candidate) -> None:
    for key in ("status", "profile", "validation_error", "lint", "similarity", "nearest_id", "raw", "attempts",
                "latency_s", "n_tokens"):
        setattr(row, key, getattr(cand, key))
    row.lint_warnings = len(cand.lint)
    row.plan = dict(cand.slot)


def _record(store: Engine, generation_id: int, cand: Candidate) -> None:
    with session_scope(store) as s:
        row = PersonaCandidate(generation_id=generation_id, slot=cand.slot["slot"])
        _fill_row(row, cand)
        s.add(row)
        g = s.get(PersonaGeneration, generation_id)
        g.n_done += 1


def _pool(store: Engine, gen: PersonaGenerator, skip_candidate: Optional[int] = None) -> Deduper:
    """The store's personas and every pending candidate not yet accepted: what a new candidate is compared with."""
    profiles = persona_store.list_profiles(store)
    with read_scope(store) as s:
        profiles += [Profile.from_dict(r.profile) for r in s.scalars(select(PersonaCandidate).where(
            PersonaCandidate.status == "pending")) if r.id != skip_candidate and r.profile.get("persona")]
    return Deduper.of(profiles, gen.embed)


def _made_slots(store: Engine, generation_id: int) -> set[int]:
    with read_scope(store) as s:
        return set(s.scalars(select(PersonaCandidate.slot).where(PersonaCandidate.generation_id == generation_id)))


def run_generation(store: Engine, spec: GenerationSpec, gen: PersonaGenerator,
                   on_result: Optional[Callable[[Candidate, int, int], None]] = None,
                   cancelled: Callable[[], bool] = lambda: False, generation_id: Optional[int] = None) -> int:
    """Generate the spec's candidates, each stored as it arrives; returns the generation id. `on_result(cand,
    done, planned)` follows progress; once `cancelled()` is true no further call starts (what was made is
    kept). An existing generation (generation_id) continues: only its slots without a candidate are made."""
    gid = generation_id if generation_id is not None else create_generation(store, spec, gen)
    made = _made_slots(store, gid)
    slots = [slot for slot in plan_slots(spec) if slot["slot"] not in made]
    done = len(made)
    with session_scope(store) as s:
        g = s.get(PersonaGeneration, gid)
        g.status, g.n_done, g.error, g.finished_at = "running", done, "", None

    def record(cand: Candidate) -> None:
        nonlocal done
        _record(store, gid, cand)
        done += 1
        if on_result is not None:
            on_result(cand, done, spec.count)

    status, error = "finished", ""
    try:
        asyncio.run(gen.run(slots, _pool(store, gen), lambda slot: _candidate_id(gid, slot), record, cancelled))
        status = "cancelled" if cancelled() and done < spec.count else "finished"
    except Exception as exc:  # recorded on the generation; the candidates made so far stay
        status, error = "failed", f"{type(exc).__name__}: {str(exc)[:500]}"
    finally:
        with session_scope(store) as s:
            g = s.get(PersonaGeneration, gid)
            g.status, g.error, g.finished_at = status, error, utcnow()
    return gid


class GenerationFailed(RuntimeError):
    """A generation run by a job ended failed (its error is on the generation row too)."""


def run_generation_job(store: Engine, generation_id: int, cancelled: Callable[[], bool],
                       progress: Callable[[int, int], None]) -> str:
    """The work of a "personas" job: run (or continue) the stored generation with the generator its settings
    name; `progress(done, planned)` after each candidate. Returns its status (finished / cancelled); raises
    GenerationFailed when it failed, so the job fails too."""
    g = get_generation(store, generation_id)
    if g is None:
        raise ProfileError({"generation_id": f"no persona generation with id {generation_id}"})
    spec = spec_from_dict(g["spec"])
    run_generation(store, spec, generator_for(g), on_result=lambda _c, done, n: progress(done, n),
                   cancelled=cancelled, generation_id=generation_id)
    g = get_generation(store, generation_id)
    if g["status"] == "failed":
        raise GenerationFailed(f"generation {generation_id}: {g['error']}")
    return g["status"]


# ------------------------------------------------------------------------------------------------ review
def get_generation(store: Engine, generation_id: int) -> Optional[dict[str, Any]]:
    """The generation's row as a dict with `counts` (candidates per status) added; None when missing."""
    with read_scope(store) as s:
        row = s.get(PersonaGeneration, generation_id)
        if row is None:
            return None
        counts = Counter(s.scalars(select(PersonaCandidate.status).where(
            PersonaCandidate.generation_id == generation_id)))
        return {**as_dict(row), "counts": {k: counts.get(k, 0) for k in STATUSES}}


def list_generations(store: Engine) -> list[dict[str, Any]]:
    with read_scope(store) as s:
        return [as_dict(r) for r in s.scalars(select(PersonaGeneration).order_by(PersonaGeneration.id.desc()))]


def list_candidates(store: Engine, generation_id: int) -> list[dict[str, Any]]:
    with read_scope(store) as s:
        return [as_dict(r) for r in s.scalars(select(PersonaCandidate).where(
            PersonaCandidate.generation_id == generation_id).order_by(PersonaCandidate.slot))]


def get_candidate(store: Engine, candidate_id: int) -> Optional[dict[str, Any]]:
    with read_scope(store) as s:
        row = s.get(PersonaCandidate, candidate_id)
        return as_dict(row) if row is not None else None


def _reviewable(s: Any, candidate_id: int) -> PersonaCandidate:
    row = get_or_raise(s, PersonaCandidate, candidate_id,
                       lambda _: ProfileError({"candidate": f"no candidate with id {candidate_id}"}))
    if row.status == "accepted":
        raise ProfileError({"candidate": f"candidate {candidate_id} is already accepted as {row.persona_id!r}"})
    return row


def accept_candidate(store: Engine, candidate_id: int, edited: Optional[Profile] = None) -> Profile:
    """Store the candidate (or its edited version) as a persona with a fresh id and mark it accepted.
    An invalid candidate must be edited first; ProfileError names the field otherwise."""
    cand = get_candidate(store, candidate_id)
    if cand is None:
        raise ProfileError({"candidate": f"no candidate with id {candidate_id}"})
    if edited is None and cand["status"] == "invalid":
        raise ProfileError({"candidate": f"candidate {candidate_id} is invalid ({cand['validation_error'][:200]}); "
                                         "edit it first"})
    data = (edited.to_dict() if edited is not None else dict(cand["profile"]))
    extra = dict(data.get("extra") or {})
    extra.update(generation_id=cand["generation_id"], candidate_id=candidate_id)
    data.update(id=persona_store.fresh_id(store, data.get("name") or "generated"), source="generated", extra=extra)
    profile = Profile.from_dict(data)
    profile.validate()
    with session_scope(store) as s:  # the persona and the candidate's status in one transaction
        row = _reviewable(s, candidate_id)
        if s.get(Persona, profile.id) is not None:
            raise ProfileError({"id": f"a profile with id {profile.id!r} already exists; accept again"})
        s.add(Persona(**{c: getattr(profile, c) for c in persona_store.PROFILE_COLUMNS}))
        row.status, row.persona_id, row.validation_error = "accepted", profile.id, ""
        if edited is not None:
            row.profile = edited.to_dict()
    return profile


def accept_all_valid(store: Engine, generation_id: int) -> list[Profile]:
    """Accept every pending candidate of the generation (not the duplicates or invalid ones)."""
    return [accept_candidate(store, c["id"]) for c in list_candidates(store, generation_id) if c["status"] == "pending"]


def reject_candidate(store: Engine, candidate_id: int) -> None:
    with session_scope(store) as s:
        _reviewable(s, candidate_id).status = "rejected"


def regenerate_candidate(store: Engine, candidate_id: int, gen: Optional[PersonaGenerator] = None) -> dict[str, Any]:
    """A new call for the candidate's slot (a new variation), replacing its profile and checks; the generator
    is rebuilt from the generation's recorded settings when not given."""
    cand = get_candidate(store, candidate_id)
    if cand is None:
        raise ProfileError({"candidate": f"no candidate with id {candidate_id}"})
    if cand["status"] == "accepted":
        raise ProfileError({"candidate": f"candidate {candidate_id} is already accepted as {cand['persona_id']!r}"})
    if gen is None:
        gen = generator_for(get_generation(store, cand["generation_id"]))
    slot = cand["plan"]
    new = asyncio.run(gen.one(slot, _candidate_id(cand["generation_id"], slot), _pool(store, gen, candidate_id),
                              variation=cand["regenerated"] + 1))
    with session_scope(store) as s:
        row = _reviewable(s, candidate_id)
        _fill_row(row, new)
        row.regenerated += 1
    return get_candidate(store, candidate_id)


def candidate_profile(cand: dict[str, Any]) -> Profile:
    """The candidate's profile as a Profile (for the editor), whatever its status."""
    return Profile.from_dict({"id": "", "name": "", "persona": "", "background": "", "hidden_need": "",
                              "need_category": "", "personality": "", **cand["profile"]})

