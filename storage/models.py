"""SQLAlchemy 2 typed models: the whole RLVER Lab data model.

Every result row carries what produced it: config, seed, model reference, simulator fingerprint and
code version. Rows are read and written through these classes; storage/ defines them and shares the row
helpers (storage.rows), and the package that owns a concept builds its queries over them (storage/__init__.py
says which; tests/test_layout.py keeps it so).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from storage.kept_text import KeptString, KeptText


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


# Columns several tables share, as mixins. A mixin's columns follow the table's own ones; their sort_order keeps
# them in the order of the migrated tables: code_version, created_at, then finished_at or updated_at. Only tables
# that end with exactly these columns take a mixin (Job, whose started_at sits between, spells its own).
CODE_VERSION_ORDER, CREATED_ORDER, LAST_ORDER = 1, 2, 3


class Created:
    """When the row was written."""

    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, sort_order=CREATED_ORDER)


class Recorded(Created):
    """A result row: the code version that wrote it, and when."""

    code_version: Mapped[str] = mapped_column(KeptString(64), default="", sort_order=CODE_VERSION_ORDER)


class RecordedRun(Recorded):
    """A result that runs for a while: when it ended (NULL while it runs)."""

    finished_at: Mapped[Optional[datetime]] = mapped_column(DateTime, nullable=True, sort_order=LAST_ORDER)


class Edited(Created):
    """A row people edit: when it last changed."""

    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow, onupdate=utcnow, sort_order=LAST_ORDER)


class StoreMeta(Base):
    """Facts about the store itself, e.g. its id ("store_id"), which keys job folders on disk."""

    __tablename__ = "store_meta"
    key: Mapped[str] = mapped_column(KeptString(64), primary_key=True)
    value: Mapped[str] = mapped_column(KeptText, default="")


class Persona(Base, Edited):
    """A simulated-user profile (see simulator.personas.profile.Profile for the validated form)."""

    __tablename__ = "persona"
    id: Mapped[str] = mapped_column(KeptString(64), primary_key=True)
    name: Mapped[str] = mapped_column(KeptString(200), default="")
    language: Mapped[str] = mapped_column(KeptString(8), default="en")
    persona: Mapped[str] = mapped_column(KeptText, default="")
    background: Mapped[str] = mapped_column(KeptText, default="")
    explicit_goal: Mapped[str] = mapped_column(KeptText, default="")
    hidden_need: Mapped[str] = mapped_column(KeptText, default="")
    need_category: Mapped[str] = mapped_column(KeptString(32), default="")
    personality: Mapped[str] = mapped_column(KeptString(16), default="")
    traits: Mapped[list[Any]] = mapped_column(default=list)
    first_line: Mapped[str] = mapped_column(KeptText, default="")
    difficulty: Mapped[str] = mapped_column(KeptString(16), default="standard")
    source: Mapped[str] = mapped_column(KeptString(32), default="user")  # builtin | rlver | sage | user
    extra: Mapped[dict[str, Any]] = mapped_column(default=dict)  # unknown keys kept from imports


class Job(Base):
    """A background process: training, benchmark or batch rollout."""

    __tablename__ = "job"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(KeptString(16))  # train | benchmark | rollout
    name: Mapped[str] = mapped_column(KeptString(200), default="")
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # queued | running | succeeded | failed | cancelled | interrupted
    status: Mapped[str] = mapped_column(KeptString(16), default="queued", index=True)
    pid: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    heartbeat_at: Mapped[Optional[datetime]] = mapped_column(DateTime, nullable=True)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    step: Mapped[int] = mapped_column(Integer, default=0)
    total_steps: Mapped[int] = mapped_column(Integer, default=0)
    log_path: Mapped[str] = mapped_column(KeptText, default="")
    output_dir: Mapped[str] = mapped_column(KeptText, default="")
    error: Mapped[str] = mapped_column(KeptText, default="")
    seed: Mapped[int] = mapped_column(Integer, default=0)
    code_version: Mapped[str] = mapped_column(KeptString(64), default="")
    parent_id: Mapped[Optional[int]] = mapped_column(ForeignKey("job.id"), nullable=True)  # clone / resume
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[Optional[datetime]] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[Optional[datetime]] = mapped_column(DateTime, nullable=True)
    # where the owner runs (its host name, with `pid`) and what started it: local | ray (trainer.jobs.backend)
    host: Mapped[str] = mapped_column(KeptString(255), default="", server_default="")
    backend: Mapped[str] = mapped_column(KeptString(16), default="local", server_default="local")
    backend_address: Mapped[str] = mapped_column(KeptText, default="", server_default="")  # Ray's Jobs API (http://..)
    backend_job_id: Mapped[str] = mapped_column(KeptString(64), default="", server_default="")  # Ray's submission id
    attempt: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # launches before this one (resumes)

    metrics: Mapped[list["Metric"]] = relationship(back_populates="job", cascade="all, delete-orphan")
    checkpoints: Mapped[list["Checkpoint"]] = relationship(back_populates="job", cascade="all, delete-orphan")


class EvalRun(Base, RecordedRun):
    """One Sentient-benchmark run: a policy scored against a pinned simulator on a profile set."""

    __tablename__ = "eval_run"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[Optional[int]] = mapped_column(ForeignKey("job.id"), nullable=True)
    name: Mapped[str] = mapped_column(KeptString(200), default="")
    model_ref: Mapped[str] = mapped_column(KeptText, default="")
    simulator_fingerprint: Mapped[dict[str, Any]] = mapped_column(default=dict)
    fingerprint_hash: Mapped[str] = mapped_column(KeptString(64), default="", index=True)
    profile_set_hash: Mapped[str] = mapped_column(KeptString(64), default="")
    protocol: Mapped[dict[str, Any]] = mapped_column(default=dict)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    status: Mapped[str] = mapped_column(KeptString(16), default="running")
    score: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    success: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    failure: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    n: Mapped[int] = mapped_column(Integer, default=0)
    n_errors: Mapped[int] = mapped_column(Integer, default=0)
    ci_low: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    ci_high: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    seed: Mapped[int] = mapped_column(Integer, default=0)


class Dialogue(Base, RecordedRun):
    """One conversation between a policy and the simulated user (or an imported transcript)."""

    __tablename__ = "dialogue"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    persona_id: Mapped[Optional[str]] = mapped_column(KeptString(64), nullable=True, index=True)
    persona_snapshot: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the profile as used
    source: Mapped[str] = mapped_column(KeptString(16), default="rollout")  # rollout|train|benchmark|import|chat
    collection: Mapped[str] = mapped_column(KeptString(200), default="", index=True)  # e.g. imported file name
    external_id: Mapped[str] = mapped_column(KeptString(128), default="")
    policy_ref: Mapped[str] = mapped_column(KeptText, default="")
    mode: Mapped[str] = mapped_column(KeptString(8), default="direct")  # think | direct
    simulator_fingerprint: Mapped[dict[str, Any]] = mapped_column(default=dict)
    fingerprint_hash: Mapped[str] = mapped_column(KeptString(64), default="", index=True)
    job_id: Mapped[Optional[int]] = mapped_column(ForeignKey("job.id"), nullable=True, index=True)
    step: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    group_id: Mapped[str] = mapped_column(KeptString(64), default="")
    eval_run_id: Mapped[Optional[int]] = mapped_column(ForeignKey("eval_run.id"), nullable=True, index=True)
    # running | finished | failed | cancelled
    status: Mapped[str] = mapped_column(KeptString(16), default="running")
    final_emotion: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    # success | failure | goodbye | max_turns | error | cancelled
    outcome: Mapped[str] = mapped_column(KeptString(16), default="")
    error: Mapped[str] = mapped_column(KeptText, default="")
    n_turns: Mapped[int] = mapped_column(Integer, default=0)  # policy turns
    seed: Mapped[int] = mapped_column(Integer, default=0)
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)

    turns: Mapped[list["Turn"]] = relationship(
        back_populates="dialogue", cascade="all, delete-orphan", order_by="Turn.index"
    )


class Turn(Base, Created):
    """One message. User turns carry the emotion, its change and the simulator's inner thoughts."""

    __tablename__ = "turn"
    __table_args__ = (UniqueConstraint("dialogue_id", "index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(KeptString(16))  # user | assistant
    text: Mapped[str] = mapped_column(KeptText, default="")
    think_text: Mapped[str] = mapped_column(KeptText, default="")
    emotion: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    delta: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    inner: Mapped[dict[str, Any]] = mapped_column(default=dict)  # analysis, planning, components
    n_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str] = mapped_column(KeptText, default="")
    # policy turns of training: updates the sampling weights had seen (overlapped training samples with
    # weights up to max_staleness updates behind the learner); NULL for user turns and untracked engines
    policy_version: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)

    dialogue: Mapped[Dialogue] = relationship(back_populates="turns")


class Metric(Base, Created):
    __tablename__ = "metric"
    __table_args__ = (UniqueConstraint("job_id", "step", "name"), Index("ix_metric_job_name", "job_id", "name"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(KeptString(64))
    value: Mapped[float] = mapped_column(Float)

    job: Mapped[Job] = relationship(back_populates="metrics")


class Checkpoint(Base, Created):
    __tablename__ = "checkpoint"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("job.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(KeptText)
    metrics: Mapped[dict[str, Any]] = mapped_column(default=dict)

    job: Mapped[Job] = relationship(back_populates="checkpoints")


class JudgeScore(Base, Recorded):
    """One dialogue's ratings by the social-cognition judge (simulator/evaluation/judge.py): a 1-5 score and a reason
    per dimension, or the error that kept it from being judged. One row per dialogue and judge fingerprint."""

    __tablename__ = "judge_score"
    __table_args__ = (UniqueConstraint("dialogue_id", "judge_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id", ondelete="CASCADE"), index=True)
    eval_run_id: Mapped[Optional[int]] = mapped_column(ForeignKey("eval_run.id"), nullable=True,
                                                       index=True)  # the dialogue's, for a run's radar
    judge_fingerprint: Mapped[dict[str, Any]] = mapped_column(default=dict)  # endpoint, model, prompt, sampling
    judge_hash: Mapped[str] = mapped_column(KeptString(64), default="", index=True)
    status: Mapped[str] = mapped_column(KeptString(16), default="ok")  # ok | error
    error_kind: Mapped[str] = mapped_column(KeptString(16), default="")  # parse | refusal | timeout | empty | backend
    error: Mapped[str] = mapped_column(KeptText, default="")
    scores: Mapped[dict[str, Any]] = mapped_column(default=dict)  # dimension -> 1..5
    reasons: Mapped[dict[str, Any]] = mapped_column(default=dict)  # dimension -> text
    mean: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    raw: Mapped[str] = mapped_column(KeptText, default="")  # the judge's last answer
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    n_tokens: Mapped[int] = mapped_column(Integer, default=0)


class PersonaSet(Base, Recorded):
    """A named, ordered set of stored personas (simulator.personas.sets). `content_hash` is the hash of
    its members' profile fingerprints in order when it was made; a member edited since gives another hash
    when the set is resolved, so runs made before and after never look alike."""

    __tablename__ = "persona_set"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(KeptString(200), unique=True)
    content_hash: Mapped[str] = mapped_column(KeptString(64), default="")
    source_kind: Mapped[str] = mapped_column(KeptString(16), default="manual")  # filter|generation|import|split|manual
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)  # what made it: filters, generation id, file ...

    members: Mapped[list["PersonaSetMember"]] = relationship(
        back_populates="persona_set", cascade="all, delete-orphan", order_by="PersonaSetMember.position")


class PersonaSetMember(Base):
    """One persona of a set, at its position. The id is kept even if the persona is deleted later."""

    __tablename__ = "persona_set_member"
    __table_args__ = (UniqueConstraint("set_id", "position"), UniqueConstraint("set_id", "persona_id"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    set_id: Mapped[int] = mapped_column(ForeignKey("persona_set.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    persona_id: Mapped[str] = mapped_column(KeptString(64))

    persona_set: Mapped[PersonaSet] = relationship(back_populates="members")


class PersonaGeneration(Base, RecordedRun):
    """One batch of LLM-written persona candidates (simulator/personas/generation.py): the endpoint and model
    asked, the prompt version and hash, the spec, and how far it got."""

    __tablename__ = "persona_generation"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    endpoint: Mapped[str] = mapped_column(KeptString(200), default="")  # host:port of the base URL, never a key
    model: Mapped[str] = mapped_column(KeptString(200), default="")
    prompt_version: Mapped[str] = mapped_column(KeptString(32), default="")
    prompt_sha256: Mapped[str] = mapped_column(KeptString(64), default="")
    spec: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the GenerationSpec as loaded
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)  # threshold, sampling, response format
    # running | finished | cancelled | failed
    status: Mapped[str] = mapped_column(KeptString(16), default="running")
    n_planned: Mapped[int] = mapped_column(Integer, default=0)
    n_done: Mapped[int] = mapped_column(Integer, default=0)  # slots answered (any status)
    error: Mapped[str] = mapped_column(KeptText, default="")
    seed: Mapped[int] = mapped_column(Integer, default=0)


class PersonaCandidate(Base, Edited):
    """One generated profile waiting for review; accepted ones become a Persona (`persona_id`)."""

    __tablename__ = "persona_candidate"
    __table_args__ = (UniqueConstraint("generation_id", "slot"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation_id: Mapped[int] = mapped_column(ForeignKey("persona_generation.id", ondelete="CASCADE"), index=True)
    slot: Mapped[int] = mapped_column(Integer)  # index in the spec's plan
    plan: Mapped[dict[str, Any]] = mapped_column(default=dict)  # what the slot asked for
    profile: Mapped[dict[str, Any]] = mapped_column(default=dict)  # Profile.to_dict(), or what could be read
    # pending | accepted | rejected | invalid | duplicate
    status: Mapped[str] = mapped_column(KeptString(16), default="pending", index=True)
    validation_error: Mapped[str] = mapped_column(KeptText, default="")
    lint_warnings: Mapped[int] = mapped_column(Integer, default=0)
    lint: Mapped[list[Any]] = mapped_column(default=list)  # [{"field", "problem"}]
    similarity: Mapped[Optional[float]] = mapped_column(Float, nullable=True)  # to the nearest persona
    nearest_id: Mapped[str] = mapped_column(KeptString(64), default="")
    persona_id: Mapped[str] = mapped_column(KeptString(64), default="")  # the stored persona once accepted
    raw: Mapped[str] = mapped_column(KeptText, default="")  # the model's last answer
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # calls made for this slot (repairs included)
    regenerated: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    n_tokens: Mapped[int] = mapped_column(Integer, default=0)


class Experiment(Base, RecordedRun):
    """A grid of training configs run as ordinary jobs, each cell's final checkpoint benchmarked on a held-out
    set (trainer/experiments/grid.py). The runner's state lives here, so a killed runner resumes from the store."""

    __tablename__ = "experiment"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(KeptString(200), default="")
    base: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the base TrainConfig fields (file + inline)
    grid: Mapped[dict[str, Any]] = mapped_column(default=dict)  # field -> values (cartesian product)
    benchmark: Mapped[dict[str, Any]] = mapped_column(default=dict)  # BenchmarkConfig fields of the held-out run
    judge: Mapped[dict[str, Any]] = mapped_column(default=dict)  # {} or {model, base_url, ...}
    parallel: Mapped[int] = mapped_column(Integer, default=1)  # cells launched at once
    source: Mapped[str] = mapped_column(KeptText, default="")  # the grid file's text as given
    # queued | running | succeeded | failed | cancelled
    status: Mapped[str] = mapped_column(KeptString(16), default="queued", index=True)
    runner_pid: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    error: Mapped[str] = mapped_column(KeptText, default="")
    # the runner's host and heartbeat, with runner_pid: who runs it, and whether it lives (trainer.experiments.owner)
    runner_host: Mapped[str] = mapped_column(KeptString(255), default="", server_default="")
    runner_heartbeat_at: Mapped[Optional[datetime]] = mapped_column(DateTime, nullable=True)

    cells: Mapped[list["ExperimentCell"]] = relationship(back_populates="experiment", cascade="all, delete-orphan",
                                                         order_by="ExperimentCell.index")


class ExperimentCell(Base):
    """One point of an experiment's grid: its settings, its training job and its held-out benchmark job."""

    __tablename__ = "experiment_cell"
    __table_args__ = (UniqueConstraint("experiment_id", "index"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiment.id", ondelete="CASCADE"), index=True)
    index: Mapped[int] = mapped_column(Integer)
    params: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the grid's values of this cell
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)  # the full TrainConfig
    # queued | training | benchmarking | judging | succeeded | failed | cancelled
    status: Mapped[str] = mapped_column(KeptString(16), default="queued")
    train_job_id: Mapped[Optional[int]] = mapped_column(ForeignKey("job.id"), nullable=True, index=True)
    benchmark_job_id: Mapped[Optional[int]] = mapped_column(ForeignKey("job.id"), nullable=True, index=True)
    eval_run_id: Mapped[Optional[int]] = mapped_column(ForeignKey("eval_run.id"), nullable=True)
    error: Mapped[str] = mapped_column(KeptText, default="")

    experiment: Mapped[Experiment] = relationship(back_populates="cells")


class Comparison(Base, RecordedRun):
    """Two policies played against the same personas, simulated user, seeds and rules (trainer/benchmarking/
    compare.py): one eval run per policy and seed, and their dialogues paired persona by persona."""

    __tablename__ = "comparison"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(KeptString(200), default="")
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)  # CompareConfig fields
    a_ref: Mapped[str] = mapped_column(KeptText, default="")  # the policies' model references as resolved
    b_ref: Mapped[str] = mapped_column(KeptText, default="")
    eval_runs: Mapped[dict[str, Any]] = mapped_column(default=dict)  # {"a": [ids per seed], "b": [...]}
    summary: Mapped[dict[str, Any]] = mapped_column(default=dict)  # paired_summary(...) of the finished pairs
    status: Mapped[str] = mapped_column(KeptString(16), default="running")  # running | succeeded | failed
    error: Mapped[str] = mapped_column(KeptText, default="")


class ComparisonPair(Base):
    """One persona at one seed: A's dialogue and B's, two ordinary dialogues linked here."""

    __tablename__ = "comparison_pair"
    __table_args__ = (UniqueConstraint("comparison_id", "persona_id", "seed"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    comparison_id: Mapped[int] = mapped_column(ForeignKey("comparison.id", ondelete="CASCADE"), index=True)
    persona_id: Mapped[str] = mapped_column(KeptString(200))
    seed: Mapped[int] = mapped_column(Integer, default=0)
    a_dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id"))
    b_dialogue_id: Mapped[int] = mapped_column(ForeignKey("dialogue.id"))
