"""Shadow judgements of a stored human set as a job: a simulated user (any simulator spec) played over every
reply of human-played dialogues (`human:NAME`, simulator.evaluation.human_corpora), from its own running
emotion, its judgements stored beside the people's turns keyed by the simulator's fingerprint.

    job_id, summary = run_shadow_foreground(store, simulator, "human:esconv", seed)   # `python -m trainer shadow`
    summary = resume_shadow(store, job_id)                 # refused while its owner lives (pid named)
    RUNNERS["shadow"] -> shadow_job(store, ctx)           # `trainer resume ID`, a job launched by the app

For each dialogue the simulator starts at its own start emotion (its rules'). At each user turn that answers a
policy reply it gets a fresh simulated user of the dialogue's persona, set to its running emotion, and
judges the reply given the dialogue before it (the people's own messages); the judged emotion is its running
emotion for the next reply. Each judgement's seed is derived from the job's seed, the set, the dialogue's id in
its corpus and the turn, so the same turn gets the same judgement in any run and order: a run killed at any
point and resumed (only turns without a judgement under the fingerprint are played, from the last stored
emotion) stores exactly what an uninterrupted run stores. A resume is refused when the simulator's
fingerprint has changed.
"""
from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any, Optional

from sqlalchemy import select

from simulator.evaluation.human_agreement import set_fingerprint
from simulator.evaluation.human_corpora import human_set_ids
from simulator.llm.hashing import fingerprint_hash
from simulator.personas.profile import Profile
from simulator.user.spec import SimulatorSpec
from storage import Dialogue, code_version, read_scope
from storage.ratings import ShadowJudgement, add_shadow
from trainer.jobs.foreground import job_to_resume, resume_foreground, run_foreground
from trainer.jobs.queue import JobError, create_job
from trainer.rollout.build import simulator_factory

SHADOW_JOB_KIND = "shadow"
SHADOW_CONCURRENCY = 32  # dialogues judged at once
SPEC_KEYS = ("spec", "base_url", "pack", "rules", "temperature", "max_tokens", "calibration")


def shadow_seed(seed: int, set_spec: str, external_id: str, turn_index: int) -> int:
    """The seed of one judgement: a function of the job's seed and the turn's identity, never of run order."""
    digest = hashlib.sha256(f"{seed}\x00{set_spec}\x00{external_id}\x00{turn_index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def spec_of(settings: dict[str, Any]) -> SimulatorSpec:
    """The SimulatorSpec of a job's recorded settings (ValueError naming the field on a bad one)."""
    spec = SimulatorSpec(**{k: settings[k] for k in SPEC_KEYS if settings.get(k) not in (None, "")})
    if problems := spec.errors():
        field, message = next(iter(problems.items()))
        raise ValueError(f"--simulator: {field}: {message}")
    return spec


def dialogue_items(store: Any, dialogue_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(dialogue facts, its messages as {index, role, content})."""
    with read_scope(store) as s:
        d = s.get(Dialogue, dialogue_id)
        facts = {"id": d.id, "external_id": d.external_id or str(d.id), "persona": dict(d.persona_snapshot or {})}
        return facts, [{"index": t.index, "role": t.role, "content": t.text} for t in d.turns]


def stored_shadows(store: Any, dialogue_id: int, fp_hash: str) -> dict[int, dict[str, Any]]:
    with read_scope(store) as s:
        rows = s.scalars(select(ShadowJudgement).where(ShadowJudgement.dialogue_id == dialogue_id,
                                                       ShadowJudgement.fingerprint_hash == fp_hash))
        return {r.turn_index: {"emotion": r.emotion, "delta": r.delta, "error": r.error} for r in rows}


def judged_positions(messages: list[dict[str, Any]]) -> list[int]:
    """Positions of the user turns that answer a policy reply."""
    return [p for p in range(1, len(messages))
            if messages[p]["role"] == "user" and messages[p - 1]["role"] == "assistant"]


def shadow_config(store: Any, settings: dict[str, Any], set_spec: str, seed: int = 0) -> dict[str, Any]:
    """Check the simulator and the set (ValueError naming the option) and return a shadow job's config: the
    simulator, the set's dialogues, the seed, the fingerprint it will store under and the turns to judge."""
    spec = spec_of(settings)
    fp, fp_hash = set_fingerprint(store, spec, set_spec, seed)
    ids = human_set_ids(store, set_spec)
    total = sum(len(judged_positions(dialogue_items(store, i)[1])) for i in ids)
    return {"simulator": {k: getattr(spec, k) for k in SPEC_KEYS}, "set": set_spec, "dialogue_ids": ids,
            "seed": int(seed), "fingerprint": fp, "fingerprint_hash": fp_hash, "total": total}


def create_shadow_job(store: Any, settings: dict[str, Any], set_spec: str, seed: int = 0) -> int:
    """Check the simulator and the set (ValueError naming the option, nothing recorded), then record a queued
    "shadow" job with the fingerprint it will store under."""
    config = shadow_config(store, settings, set_spec, seed)
    return create_job(store, SHADOW_JOB_KIND, config, name=f"shadow {config['simulator']['spec']} · {set_spec}"[:200],
                      seed=seed)


def run_coroutine(coro: Any) -> Any:
    """Run a coroutine to its end from synchronous code, also where this thread already runs an event loop
    (a caller inside an async framework): then in a worker thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def set_state(agent: Any, emotion: float | None, replies: int) -> float:
    """Put a fresh simulated user (or the outside object inside a python: one) at the running emotion and
    reply count; its own starting emotion when `emotion` is None. Returns the emotion it starts the turn at."""
    target = getattr(agent, "inner", agent)
    if emotion is None:
        return float(getattr(target, "emotion", 40.0))
    target.emotion = emotion
    if hasattr(target, "turns"):
        target.turns = replies
    elif hasattr(target, "replies"):
        target.replies = replies
    return emotion


def shadow_job(store: Any, ctx: Any) -> dict[str, Any]:
    """The work of a shadow job (`ctx` a JobContext): play the simulator over every reply not yet judged under
    its fingerprint, reporting progress (turns done of all) and stopping between turns when cancelled. Up to
    SHADOW_CONCURRENCY dialogues are judged at once in one event loop (a dialogue's turns one after another, as
    each starts from the emotion the one before left), so the offline user's embeddings and an endpoint's
    requests batch across dialogues; every judgement's seed and starting emotion are those of a sequential run."""
    config = ctx.config
    factory = simulator_factory(spec_of(config["simulator"]))
    fp_hash, seed, set_spec = config["fingerprint_hash"], int(config["seed"]), config["set"]
    total = int(config["total"])
    count = {"done": 0, "played": 0, "errors": 0}
    began = time.monotonic()

    async def judge_dialogue(dialogue_id: int, gate: asyncio.Semaphore) -> None:
        async with gate:
            facts, messages = dialogue_items(store, dialogue_id)
            have = stored_shadows(store, dialogue_id, fp_hash)
            profile = Profile.from_dict(facts["persona"])
            emotion: float | None = None
            for n, pos in enumerate(judged_positions(messages)):
                index = messages[pos]["index"]
                if index in have:
                    emotion = have[index]["emotion"] if have[index]["emotion"] is not None else emotion
                    count["done"] += 1
                    continue
                if ctx.cancelled:
                    return
                agent = factory(profile, shadow_seed(seed, set_spec, facts["external_id"], index))
                if fingerprint_hash(agent.fingerprint()) != fp_hash:
                    raise JobError(f"shadow job {ctx.job_id}: the simulator is not the one the job started with "
                                   f"(fingerprint {fp_hash}, now {fingerprint_hash(agent.fingerprint())}); start a "
                                   "new shadow run")
                emotion = set_state(agent, emotion, n)
                history = [{"role": m["role"], "content": m["content"]} for m in messages[:pos - 1]]
                try:
                    ut = await agent.respond(history, messages[pos - 1]["content"])
                    row = {"delta": None if ut.error else ut.delta, "emotion": None if ut.error else ut.emotion,
                           "inner": ut.inner or {}, "reply_text": ut.text or "", "error": ut.error or ""}
                except Exception as exc:  # recorded beside the turn; the run goes on
                    row = {"delta": None, "emotion": None, "inner": {}, "reply_text": "",
                           "error": f"{type(exc).__name__}: {exc}"}
                add_shadow(store, dialogue_id=dialogue_id, turn_index=index, fingerprint=config["fingerprint"],
                           fingerprint_hash=fp_hash, emotion_before=emotion, code_version=code_version(), **row)
                emotion = row["emotion"] if row["emotion"] is not None else emotion
                count["played"] += 1
                count["done"] += 1
                count["errors"] += bool(row["error"])
                ctx.progress(count["done"], total)
                if count["played"] % 25 == 0:
                    rate = (time.monotonic() - began) / count["played"]
                    print(f"shadow: {count['done']}/{total} turns, about {rate * (total - count['done']):.0f} s left",
                          flush=True)

    async def every_dialogue() -> None:
        gate = asyncio.Semaphore(SHADOW_CONCURRENCY)
        await asyncio.gather(*(judge_dialogue(i, gate) for i in config["dialogue_ids"]))

    run_coroutine(every_dialogue())
    ctx.progress(count["done"], total)
    return summarize(store, config, count["played"], count["errors"], total - count["done"])


def summarize(store: Any, config: dict[str, Any], played: int, errors: int, left: int) -> dict[str, Any]:
    return {"set": config["set"], "fingerprint_hash": config["fingerprint_hash"], "turns": config["total"],
            "played": played, "errors": errors, "left": left}


def run_shadow_foreground(store: Any, settings: dict[str, Any], set_spec: str, seed: int = 0,
                          clean_stdout: bool = False) -> tuple[int, Optional[dict[str, Any]]]:
    """Record a shadow job and run it here as the job's owner; (job id, its summary)."""
    job_id = create_shadow_job(store, settings, set_spec, seed)
    return job_id, run_foreground(store, job_id, lambda ctx: shadow_job(store, ctx), clean_stdout)


def resume_shadow(store: Any, job_id: int, stop_owner: bool = False,
                  clean_stdout: bool = False) -> Optional[dict[str, Any]]:
    """Continue shadow job `job_id` here: only the turns not yet judged. JobError when it is not a shadow job,
    is finished, or its owner still lives (naming the pid; stop_owner kills it first)."""
    job_to_resume(store, job_id, SHADOW_JOB_KIND)
    return resume_foreground(store, job_id, lambda ctx: shadow_job(store, ctx), stop_owner=stop_owner,
                             clean_stdout=clean_stdout)
