"""The Sentient benchmark runner: a policy against a pinned simulator on a profile set, as an eval run.

Protocol (SAGE's test_npc.py, version PROTOCOL_VERSION): each profile's scripted first line opens the
dialogue at emotion 40; each change is clamped to +-10 and the emotion capped at 100 with no floor; the
dialogue ends when the user's message holds an end word (再见 / 拜拜; English: bye / goodbye), at >= 100
or < 10, or after 10 policy replies, the 10th of which is not judged (simulator.user.rules.RULE_SETS["standard"]).
The policy gets the prompt pack's system prompt (SAGE's own with `sage:DIR`) and no token cap: local
engines stop only at the model's context, and every cut reply is counted on the run. Dialogues run
concurrently through the dialogue rollout, each written to the store as it happens (source "benchmark",
eval_run_id). An EvalRun row records the policy, the simulator fingerprint and its hash, the profile-set
hash, the protocol, the seed and the code version, and at the end the score (simulator.evaluation.scoring).

Resumable: running an eval run again skips the profiles it already finished; a dialogue cut off by a
killed process is marked cancelled (not scored) and played again. Failed dialogues (policy or simulator
errors) stay in n as errors, never dropped.
"""
from __future__ import annotations

import hashlib
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Optional

from sqlalchemy import Engine, select

from simulator.access import config_errors, path_field
from simulator.evaluation.scoring import BenchmarkSummary
from simulator.llm.hashing import canonical_json
from simulator.llm.traffic import TrafficLimits, snapshot, traffic_text
from simulator.personas.profile import Profile
from simulator.personas.specs import PersonaSpecError, spec_record
from simulator.user.spec import SimulatorSpec
from storage import EvalRun, code_version, read_scope, session_scope
from trainer.benchmarking.checks import benchmark_problems, first_profiles, problems_text
from trainer.benchmarking.eval_runs import (
    check_replay,
    close_cut_off_dialogues,
    done_profile_ids,
    finish_eval_run,
    get_eval_run,
    scored_dialogues,
    truncations,
)
from trainer.benchmarking.progress import progress_text, run_progress
from trainer.benchmarking.protocol import protocol_record, protocol_rules
from trainer.policies.spec import PolicySpec
from trainer.rollout.build import SpecError, policy_engine, simulator_factory
from trainer.rollout.cancel_watch import watch_cancel
from trainer.rollout.types import SCHEDULES

PROGRESS_EVERY_S = 10.0  # a progress line at most this often while replies come in (and at every dialogue's end)
RECORDED_KEYS = ("policy_engine", "personas")  # what a run found, kept beside its config, never settings


class BenchmarkInputError(ValueError):
    """Bad benchmark input (profile file, config, resume target); the message names the field."""


@dataclass
class BenchmarkConfig:
    policy: str = path_field("policy", "default")  # a policy spec (trainer.policies.spec.POLICY_FORMS)
    policy_base_url: str = path_field("endpoint")  # an openai:MODEL policy's endpoint (simulator.endpoints)
    # offline (scorer v3) | offline:v2 | openai:MODEL | replay:FILE
    simulator: str = path_field("simulator", "offline")
    simulator_base_url: str = path_field("endpoint")
    # own | sage:DIR (a SAGE checkout: its simulator prompts and policy prompt)
    prompt_pack: str = path_field("pack", "own")
    calibration: str = ""  # a calibration of the simulator's changes by name (python -m simulator calibrate)
    simulator_temperature: Optional[float] = None  # openai simulator sampling (None: the backend's default)
    simulator_max_tokens: Optional[int] = None
    # a persona spec (simulator.personas.specs): builtin[:train|:heldout], file:PATH, ids
    profiles: str = path_field("personas", "builtin")
    limit: int = 0  # first N profiles of the set (0 = all)
    mode: str = "direct"  # think | direct
    temperature: float = 0.7  # policy sampling (recorded with the run)
    top_p: float = 1.0
    # per policy reply; 0 = the protocol's: no cap for API and replay policies (as SAGE), LOCAL_REPLY_CAP for local
    # engines (transformers, vLLM), which would otherwise generate to their context (docs/evaluation.md)
    max_new_tokens: int = 0
    stop_on_repetition: bool = True  # local engines: end a reply that falls into a loop (recorded; kept, flagged)
    max_tokens: int = 0  # per dialogue, prompt + reply (0 = the model's context); past it: outcome max_tokens
    concurrency: int = 16  # dialogues in flight at once (one policy batch); also the resume granularity
    # async: each dialogue at its own pace; rounds: batches that do not depend on timing (trainer.rollout.types)
    schedule: str = "async"
    # API traffic per endpoint (simulator.llm.traffic); recorded, never in the fingerprint: they change
    # when answers come, not what they say
    simulator_max_in_flight: int = 32  # openai simulator: requests in flight
    simulator_requests_per_minute: int = 0  # openai simulator: 0 = no limit
    simulator_max_retries: int = 4  # openai simulator: retries of a call on 429, 5xx, timeouts
    policy_max_in_flight: int = 32  # openai policy (the same endpoint as the simulator shares one limit)
    policy_requests_per_minute: int = 0
    policy_max_retries: int = 4
    seed: int = 0
    name: str = ""
    gpus: int = 0  # GPUs its job asks a Ray node for (1: a local policy on a GPU); resources, not the protocol

    def errors(self) -> dict[str, str]:
        e: dict[str, str] = {}
        if problem := PolicySpec(self.policy).error():
            e["policy"] = problem
        elif problem := PolicySpec.from_config(self).endpoint_error():
            e["policy_base_url"] = problem
        # the simulated user's spec, pack, sampling and traffic limits, under the protocol's rules
        e.update(SimulatorSpec.from_config(self, rules=protocol_rules()).errors())
        if not isinstance(self.profiles, str) or not self.profiles.strip():
            e["profiles"] = "required: 'builtin', 'builtin:heldout', a profiles file or persona ids"
        if not isinstance(self.limit, int) or isinstance(self.limit, bool) or self.limit < 0:
            e["limit"] = f"must be a non-negative integer (0 = all), got {self.limit!r}"
        if self.mode not in ("think", "direct"):
            e["mode"] = f"must be think or direct, got {self.mode!r}"
        if not isinstance(self.temperature, (int, float)) or self.temperature < 0:
            e["temperature"] = f"must be >= 0, got {self.temperature!r}"
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            e["top_p"] = f"must be in (0, 1], got {self.top_p!r}"
        for name in ("max_new_tokens", "max_tokens", "concurrency", "gpus"):
            v = getattr(self, name)
            low = 1 if name == "concurrency" else 0
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                e[name] = f"must be an integer >= {low}, got {v!r}"
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            e["seed"] = f"must be an integer, got {self.seed!r}"
        if self.schedule not in SCHEDULES:
            e["schedule"] = f"must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}"
        e.update(TrafficLimits.from_config(self, "policy_").errors("policy_"))
        e.update(config_errors(self))  # every declared path and endpoint, refused before anything is opened
        return e

    def validate(self) -> "BenchmarkConfig":
        errs = self.errors()
        if errs:
            raise BenchmarkInputError("invalid benchmark config: " + "; ".join(f"{k}: {v}" for k, v in errs.items()))
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BenchmarkConfig":
        if not isinstance(data, dict):
            raise BenchmarkInputError(f"config: must be a mapping, got {type(data).__name__}")
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise BenchmarkInputError(f"config: unknown setting(s) {', '.join(unknown)}")
        return cls(**data).validate()


def check_config(store: Optional[Engine], config: "BenchmarkConfig | dict[str, Any]") -> "BenchmarkConfig":
    """The config, once every input is checked (settings, profiles, pack, simulator, policy; nothing is
    played or loaded: trainer.benchmarking.checks); BenchmarkInputError naming every problem at once."""
    if isinstance(config, dict):
        unknown = sorted(set(config) - {f.name for f in fields(BenchmarkConfig)})
        if unknown:
            raise BenchmarkInputError(f"config: unknown setting(s) {', '.join(unknown)}")
        config = BenchmarkConfig(**config)
    if problems := benchmark_problems(store, config):
        raise BenchmarkInputError(problems_text("benchmark config", problems))
    return config


# -------------------------------------------------------------------------------------------- profiles
def load_profiles(spec: str, limit: int = 0, store: Optional[Engine] = None) -> list[Profile]:
    """The benchmark's profiles (a persona spec: simulator.personas.specs), first `limit`. A bad spec or
    file raises BenchmarkInputError on "profiles", listing every problem of a file by line."""
    try:
        return first_profiles(spec, limit, store)
    except PersonaSpecError as e:
        raise BenchmarkInputError(f"profiles: {e}") from None


def profile_set_hash(profiles: list[Profile]) -> str:
    """Short sha256 of the profiles as used (order-independent)."""
    text = canonical_json(sorted((p.to_dict() for p in profiles), key=lambda d: d["id"]))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ------------------------------------------------------------------------------------------- the runner
@dataclass
class BenchmarkResult:
    eval_run_id: int
    status: str  # succeeded | cancelled | failed
    summary: Optional[BenchmarkSummary]
    dialogue_ids: list[int] = field(default_factory=list)  # the scored dialogues, in scoring order
    n_skipped: int = 0  # profiles finished before this call (resume)
    protocol: dict[str, Any] = field(default_factory=dict)  # as recorded on the eval run
    truncations: dict[str, int] = field(default_factory=dict)  # trainer.benchmarking.eval_runs.truncations


def _simulator(config: BenchmarkConfig, profiles: list[Profile]) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The simulator factory under the benchmark rules and its fingerprint (from the first profile the
    simulator accepts; a simulator that accepts none is bad input)."""
    try:
        factory = simulator_factory(SimulatorSpec.from_config(config, rules=protocol_rules()))
    except SpecError as e:
        raise BenchmarkInputError(str(e)) from None
    problem = ""
    for p in profiles:
        try:
            return factory, factory(p, 0).fingerprint()
        except (ValueError, RuntimeError) as e:
            problem = problem or str(e)
    raise BenchmarkInputError(f"simulator: it cannot play any of the {len(profiles)} profile(s): {problem}")


def _policy(config: BenchmarkConfig) -> Any:
    try:
        return policy_engine(PolicySpec.from_config(config))
    except SpecError as e:
        raise BenchmarkInputError(str(e)) from None


def _open_run(store: Engine, config: BenchmarkConfig, eval_run_id: Optional[int], profiles: list[Profile],
              fp: dict[str, Any], model_ref: str, policy_info: dict[str, Any], job_id: Optional[int],
              protocol: dict[str, Any]) -> int:
    from simulator.llm.hashing import fingerprint_hash

    fp_hash, ps_hash = fingerprint_hash(fp), profile_set_hash(profiles)
    with session_scope(store) as s:
        if eval_run_id is None:
            r = EvalRun(job_id=job_id, name=config.name or config.policy, model_ref=model_ref,
                        simulator_fingerprint=fp, fingerprint_hash=fp_hash, profile_set_hash=ps_hash,
                        protocol=protocol,
                        config={**config.to_dict(), "policy_engine": policy_info,
                                "personas": spec_record(config.profiles, profiles)}, status="running",
                        seed=config.seed, code_version=code_version())
            s.add(r)
            s.flush()
            return r.id
        r = s.get(EvalRun, eval_run_id)
        if r.profile_set_hash != ps_hash:
            raise BenchmarkInputError(f"resume: the profiles of eval run {eval_run_id} changed since it started "
                                      f"(profile-set hash {r.profile_set_hash}, now {ps_hash}); start a new run")
        if r.fingerprint_hash != fp_hash:
            raise BenchmarkInputError(f"resume: the simulator of eval run {eval_run_id} changed since it started "
                                      f"(fingerprint {r.fingerprint_hash}, now {fp_hash}); start a new run")
        if (r.protocol or {}).get("protocol_hash") != protocol["protocol_hash"]:
            raise BenchmarkInputError(f"resume: the protocol of eval run {eval_run_id} changed since it started "
                                      f"(protocol {(r.protocol or {}).get('protocol_hash')}, now "
                                      f"{protocol['protocol_hash']}); start a new run")
        r.status, r.finished_at = "running", None
        return eval_run_id


def run_benchmark(store: Engine, config: Optional[BenchmarkConfig], eval_run_id: Optional[int] = None,
                  job: Any = None, log: Callable[[str], None] = print) -> BenchmarkResult:
    """Run (or, with eval_run_id, resume) an eval run to the end and score it.

    `job` is a trainer.jobs.context.JobContext when running as a background job: progress goes to it and its
    Cancel stops the dialogues in flight (they are marked cancelled and played again on resume)."""
    from storage.recorder import DialogueRecorder
    from trainer.rollout.dialogue_rollout import DialogueRollout, RolloutConfig

    if eval_run_id is not None:
        stored = get_eval_run(store, eval_run_id)
        if stored is None:
            raise BenchmarkInputError(f"resume: eval run {eval_run_id} does not exist")
        if stored["status"] == "succeeded":
            raise BenchmarkInputError(f"resume: eval run {eval_run_id} already finished (score {stored['score']})")
        cfg = {k: v for k, v in stored["config"].items() if k not in RECORDED_KEYS}
        config = BenchmarkConfig.from_dict(cfg)
    if config is None:
        raise BenchmarkInputError("config: required for a new eval run")
    check_config(store, config)  # every input, before anything is loaded or played
    profiles = load_profiles(config.profiles, config.limit, store)
    factory, fp = _simulator(config, profiles)
    policy = _policy(config)
    try:
        protocol = protocol_record(config, [p.language for p in profiles], policy.context_length,
                                   local=policy.supports_token_ids)
    except ValueError as e:  # a prompt pack that cannot be read
        raise BenchmarkInputError(f"prompt_pack: {e}") from None
    eval_run_id = _open_run(store, config, eval_run_id, profiles, fp, policy.model_ref,
                            policy.describe(), getattr(job, "job_id", None), protocol)
    close_cut_off_dialogues(store, eval_run_id)
    done = done_profile_ids(store, eval_run_id)
    todo = [p for p in profiles if p.id not in done]
    total, n_done = len(profiles), len(profiles) - len(todo)
    rules = protocol_rules()
    log(f"eval run {eval_run_id}: {total} profile(s), {n_done} already done, policy {policy.model_ref}, "
        f"simulator {fp.get('backend')}:{fp.get('model')}")

    last_progress = [time.monotonic()]

    def on_event(ev: Any) -> None:
        nonlocal n_done
        if ev.kind == "turn" and (ev.turn or {}).get("role") == "assistant" \
                and time.monotonic() - last_progress[0] >= PROGRESS_EVERY_S:
            last_progress[0] = time.monotonic()
            log(f"progress: {progress_text(run_progress(store, eval_run_id, rules.max_turns))}")
        if ev.kind != "finished" or ev.sample.status == "cancelled":
            return
        n_done += 1
        smp = ev.sample
        what = f"error: {smp.error}" if smp.status == "failed" else f"{smp.final_emotion:g} ({smp.outcome})"
        traffic = traffic_text(snapshot())
        log(f"[{n_done}/{total}] {ev.profile_id}: {what}" + (f" | API {traffic}" if traffic else ""))
        log(f"progress: {progress_text(run_progress(store, eval_run_id, rules.max_turns))}")
        last_progress[0] = time.monotonic()
        if job is not None:
            job.progress(n_done, total)

    rollout_config = RolloutConfig(
        mode=config.mode, max_turns=rules.max_turns, max_new_tokens=protocol["max_new_tokens"],
        stop_on_repetition="stop_on_repetition" in protocol,
        max_tokens=config.max_tokens or None, temperature=config.temperature, top_p=config.top_p,
        seed=config.seed, system_prompts=protocol["policy_system_prompts"], empty_reply="judge",
        empty_user_message="judge", source="benchmark", schedule=config.schedule,
        eval_run_id=eval_run_id, job_id=getattr(job, "job_id", None))
    rollout = DialogueRollout(policy, factory, recorder=DialogueRecorder(store), on_event=on_event,
                              config=rollout_config)
    if job is not None:
        job.progress(n_done, total)
    end_watch = watch_cancel(job, rollout.cancel)  # Cancel of the job -> stop the dialogues in flight
    restore_signals = _stop_on_signals(rollout, eval_run_id, log) if job is None else (lambda: None)
    status = "succeeded"
    try:
        for i in range(0, len(todo), config.concurrency):
            if rollout.cancelled:
                break
            rollout.run(todo[i:i + config.concurrency])
        if rollout.cancelled:
            status = "cancelled"
            log(f"stopped: dialogues in flight end as cancelled; continue later with --resume {eval_run_id}")
    except KeyboardInterrupt:
        status = "cancelled"
        close_cut_off_dialogues(store, eval_run_id)
    except BaseException:
        finish_eval_run(store, eval_run_id, "failed")
        raise
    finally:
        end_watch()
        restore_signals()
        policy.close()
    if SimulatorSpec(config.simulator).kind == "replay":
        check_replay(store, eval_run_id, config.simulator, log)
    summary = finish_eval_run(store, eval_run_id, status)
    ids = [d["id"] for d in scored_dialogues(store, eval_run_id)]
    if job is not None and summary is not None:
        job.log_metrics(summary.n, {"score": summary.score, "success": summary.success, "failure": summary.failure,
                                    "n_errors": summary.n_errors, "ci_low": summary.ci_low, "ci_high": summary.ci_high})
    return BenchmarkResult(eval_run_id, status, summary, ids, total - len(todo), protocol,
                           truncations(store, eval_run_id))


def _stop_on_signals(rollout: Any, eval_run_id: int, log: Callable[[str], None]) -> Callable[[], None]:
    """Ctrl-C / SIGTERM in a command-line run: the dialogues in flight end as cancelled and the run is
    recorded as cancelled (resumable); a second Ctrl-C quits at once. Returns the undo function."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, _frame: Any) -> None:
        if rollout.cancelled:
            raise KeyboardInterrupt
        log(f"stopping: dialogues in flight end as cancelled; continue later with --resume {eval_run_id}")
        rollout.cancel()

    def restore() -> None:
        for sig, previous in old.items():
            signal.signal(sig, previous)

    for sig in old:
        signal.signal(sig, handler)
    return restore


def run_benchmark_job(store: Engine, ctx: Any) -> BenchmarkResult:
    """Entry of a "benchmark" job (trainer.job_runner): the job's eval run is resumed when it has one."""
    config = BenchmarkConfig.from_dict(ctx.config)
    with read_scope(store) as s:
        existing = s.scalars(select(EvalRun.id).where(EvalRun.job_id == ctx.job_id).order_by(EvalRun.id)).first()
    result = run_benchmark(store, None if existing else config, eval_run_id=existing, job=ctx)
    if result.summary is not None:
        from simulator.evaluation.scoring import format_summary

        print(format_summary(result.summary, f"eval run {result.eval_run_id}"), flush=True)
    return result


def start_benchmark_job(store: Engine, store_url: str, config: dict[str, Any]) -> int:
    """Check `config` (BenchmarkConfig fields: every input, check_config), record a "benchmark" job and launch
    it; returns the job id. A bad input is reported at once, not in the job's log."""
    from trainer.jobs.queue import create_job, launch

    cfg = check_config(store, config)
    job_id = create_job(store, "benchmark", cfg.to_dict(), name=cfg.name or f"benchmark {cfg.policy}", seed=cfg.seed)
    launch(store_url, job_id)
    return job_id
