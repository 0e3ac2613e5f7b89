"""The rollout's data: its settings (RolloutConfig), a finished dialogue as training data (RolloutSample,
token layout in trainer/rollout/tokens.py's docstring), the events the rollout streams (RolloutEvent) and the
contract of whoever records dialogues as they happen (RolloutRecorder, e.g. storage.recorder)."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

from simulator.personas.profile import Profile
from trainer.policies.base import SamplingConfig
from trainer.rollout.templates import BAD_THINK_POLICIES, MODES

TRUNCATED_POLICIES = ("keep", "fail")
# How a dialogue's seed is made: from who plays (the run's seed, the persona, the how-many-th time this persona
# is played in the run), never from a position in a list, so any subset of a run, in any order, on any number
# of workers, plays the same dialogues (a resumed run plays what an uninterrupted one would have)
SEED_RULE = "sha256('<run seed>:<persona id>:<repeat index>'), first 4 bytes big-endian, & 0x7fffffff"


def dialogue_seed(run_seed: int, persona_id: str, repeat: int = 0) -> int:
    """The seed of the `repeat`-th dialogue (0-based) of persona `persona_id` in a run seeded `run_seed`
    (SEED_RULE); it seeds the simulated user and, with the turn number, every policy reply."""
    digest = hashlib.sha256(f"{int(run_seed)}:{persona_id}:{int(repeat)}".encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF
SCHEDULES = ("async", "rounds")


@dataclass
class RolloutConfig:
    mode: str = "direct"  # think | direct
    # "async": each dialogue's next policy turn is sampled as soon as its simulated user has answered,
    # batched with whatever else is ready (trainer.policies.scheduler); "rounds": the turns of all active
    # dialogues in one batch, then wait for every simulated user (the earlier loop, kept for comparison)
    schedule: str = "async"
    max_batch: int = 32  # async: most policy turns in one batch (chat engines: requests in flight at once)
    gather_ms: float = 5.0  # async: how long a ready turn waits for others to join its batch
    max_turns: int = 8  # policy turns per dialogue
    max_new_tokens: Optional[int] = 256  # per policy turn (None: no cap but the dialogue's budget)
    max_tokens: Optional[int] = 4096  # per dialogue: prompt + reply (None: the model's context; API: none)
    # the members of a group share one generated opening: the first member's simulator speaks and the others
    # start from a copy of it (RLVER clones a group's simulators from one); off: each member opens on its own
    shared_opening: bool = False
    # the policy's system prompt per profile language (a language not here: trainer.rollout.templates' for the mode)
    system_prompts: dict[str, str] = field(default_factory=dict)
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int = 0
    bad_think: str = "penalize"  # see trainer.rollout.templates (the penalty: trainer.learning.algorithms.RewardConfig)
    truncated: str = "keep"  # a reply that hit max_new_tokens: keep it (flagged) or fail the dialogue
    empty_reply: str = "fail"  # an empty policy reply: fail the dialogue, or "judge" it like any (SAGE)
    # an empty (or whitespace-only) simulated-user message: fail the dialogue as a simulator fault, or go on and
    # let the policy answer it like any message (SAGE's test_npc.py loop does; the benchmark sets "judge")
    empty_user_message: str = "fail"
    # end a policy reply that falls into a degenerate loop (trainer.policies.repetition; local engines): kept
    # and flagged like a reply cut at max_new_tokens
    stop_on_repetition: bool = False
    source: str = "rollout"
    job_id: Optional[int] = None
    step: Optional[int] = None
    eval_run_id: Optional[int] = None  # set by the benchmark runner: its dialogues belong to an eval run

    def validate(self) -> "RolloutConfig":
        errs = []
        if self.mode not in MODES:
            errs.append(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.schedule not in SCHEDULES:
            errs.append(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if not isinstance(self.gather_ms, (int, float)) or isinstance(self.gather_ms, bool) or self.gather_ms < 0:
            errs.append(f"gather_ms must be a number >= 0, got {self.gather_ms!r}")
        for name in ("max_turns", "max_batch", "max_new_tokens", "max_tokens"):
            v = getattr(self, name)
            if (v is not None or name in ("max_turns", "max_batch")) and (not isinstance(v, int) or v < 1):
                errs.append(f"{name} must be a positive integer, got {v!r}")
        if self.bad_think not in BAD_THINK_POLICIES:
            errs.append(f"bad_think must be one of {', '.join(BAD_THINK_POLICIES)}, got {self.bad_think!r}")
        for name in ("empty_reply", "empty_user_message"):
            if getattr(self, name) not in ("fail", "judge"):
                errs.append(f"{name} must be fail or judge, got {getattr(self, name)!r}")
        if self.truncated not in TRUNCATED_POLICIES:
            errs.append(f"truncated must be one of {', '.join(TRUNCATED_POLICIES)}, got {self.truncated!r}")
        if errs:
            raise ValueError("; ".join(errs))
        SamplingConfig(self.temperature, self.top_p, self.max_new_tokens, self.seed).validate()
        return self


@dataclass
class RolloutSample:
    """One finished dialogue as training data (see the module docstring for the token layout)."""

    key: str
    dialogue_id: Optional[int]
    profile_id: str
    group_id: str
    input_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)  # 1 on policy-sampled ids only
    old_logprobs: list[float] = field(default_factory=list)  # aligned with input_ids; 0 where mask is 0
    # aligned with input_ids: the policy version (updates seen) of the weights that sampled each id; -1 where
    # mask is 0 or the engine does not say (only trainer.policies.versioned.VersionedEngine does)
    token_versions: list[int] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each turn's sampled ids
    segments: list[tuple[int, int]] = field(default_factory=list)  # [start, end) causal sequences
    emotions: list[float] = field(default_factory=list)  # after the opening, then after each policy turn
    final_emotion: Optional[float] = None
    outcome: str = ""
    error: str = ""
    status: str = "running"  # finished | failed | cancelled
    n_turns: int = 0
    format_ok: bool = True  # False once a turn had no well-formed think block
    messages: list[dict] = field(default_factory=list)  # the visible transcript
    thoughts: list[str] = field(default_factory=list)  # per policy turn ("" in direct mode)
    reply_versions: list[Optional[int]] = field(default_factory=list)  # per policy turn: its policy version

    def oldest_version(self) -> Optional[int]:
        """The policy version of the dialogue's oldest reply (None: no reply, or none carries a version)."""
        known = [v for v in self.reply_versions if v is not None]
        return min(known) if known else None

    def rows(self) -> list[tuple[list[int], list[int], list[float]]]:
        """(input_ids, action_mask, old_logprobs) per causal segment, for log-prob recomputation."""
        return [(self.input_ids[a:b], self.action_mask[a:b], self.old_logprobs[a:b]) for a, b in self.segments]


@dataclass
class RolloutEvent:
    kind: str  # started | turn | finished | tick (stream(tick_s=...): nothing happened for tick_s seconds)
    key: str
    dialogue_id: Optional[int]
    profile_id: str
    group_id: str
    turn: Optional[dict] = None  # role, index, text, think, emotion, delta, inner, error
    sample: Optional[RolloutSample] = None  # on finished


def next_event(events: Any, tick_s: Optional[float]) -> Optional[RolloutEvent]:
    """The next event of a stream's queue; a "tick" event when none came within `tick_s` (None: wait)."""
    import queue

    try:
        return events.get(timeout=tick_s)
    except queue.Empty:
        return RolloutEvent(kind="tick", key="", dialogue_id=None, profile_id="", group_id="")


@dataclass
class DialogueStart:
    """What is known of a dialogue when it starts: what a recorder stores with it."""

    key: str  # the rollout's own name of the dialogue (unique within a run)
    profile: Profile
    group_id: str  # the dialogues of one profile in one run (a GRPO group)
    seed: int  # the dialogue's seed (its simulated user's; its policy turns derive theirs from it)
    simulator_fingerprint: dict[str, Any]  # {} when the simulated user could not be built
    fingerprint_hash: str  # simulator.llm.hashing.fingerprint_hash of it ("" for {})
    policy_ref: str  # PolicyEngine.model_ref
    policy: dict[str, Any]  # PolicyEngine.describe()
    config: RolloutConfig


class RolloutRecorder(Protocol):
    """Told of every dialogue as it happens, in order, before the event listeners. An exception raised
    here fails the dialogue (a store that cannot be written is not ignored)."""

    def dialogue_started(self, start: DialogueStart) -> Optional[int]:
        """Returns the dialogue's id (e.g. its store row), carried by its events and sample."""

    def turn_recorded(self, dialogue_id: Optional[int], turn: dict[str, Any]) -> None:
        """`turn`: role, index (the message position), text and the turn's fields (as RolloutEvent.turn)."""

    def dialogue_finished(self, dialogue_id: Optional[int], sample: RolloutSample) -> None:
        """The sample's status, outcome, error and final emotion are final."""
