"""The multi-turn dialogue rollout: many policy <-> simulated-user dialogues, run to the end.

Schedules (RolloutConfig.schedule):
- "async" (default): one asyncio task per dialogue plays it from its opening to its end; each policy turn
  is submitted as soon as the dialogue's simulated user has answered, and the policy batches whatever is
  ready (trainer.policies.scheduler: a gathering scheduler for engines with token ids, concurrent requests
  for chat engines). A slow simulated user delays only its own dialogue.
- "rounds" (as in the paper's multi-turn PPO, without the reference code's bugs): the policy turns of ALL
  active dialogues are sampled in ONE batch, then every dialogue records its reply and awaits its own
  simulated user, all concurrently; the next round waits for the slowest user.
Either way every dialogue is tracked by its key, never by a position in a shrinking list, so each reply
goes to its own simulated user, and Stop cancels the steps still waiting. A dialogue's seed comes from who
plays it (types.dialogue_seed: run seed, persona, repeat index), never its place in a list, so a resumed or
split run plays the same dialogues; each policy turn's seed comes from the dialogue's and the turn, so both
schedules sample the same replies where the engine honours per-request seeds (trainer/policies/base.py).
The rollout knows no store: a `recorder` (trainer.rollout.types.RolloutRecorder, e.g.
storage.recorder.DialogueRecorder) is told of every dialogue and turn as it happens, then events go to
`on_event`. Samples carry emotions, the final emotion and format flags; the reward is computed by the
training step (trainer.learning.algorithms.rlver_reward).
With `shared_opening` the members of a group start from one opening: the first member's simulated user
speaks and the others adopt it (RLVER clones a group's simulators from one that has already spoken).
Data classes: trainer/rollout/types.py; token bookkeeping: trainer/rollout/tokens.py.
"""
from __future__ import annotations

import asyncio
import logging
import queue
import threading
import uuid
from dataclasses import asdict
from typing import Any, Awaitable, Iterator, Optional

from simulator.llm.hashing import fingerprint_hash
from simulator.personas.profile import Profile
from simulator.user.agent import SimulatorFactory, UserTurn
from trainer.policies.base import Generation, PolicyEngine
from trainer.policies.repetition import RepetitionRule
from trainer.policies.scheduler import BatchScheduler, ConcurrentRequests, PolicyRequest, sample_batch
from trainer.rollout import types as rollout_types
from trainer.rollout.state import DialogueState, SharedOpenings
from trainer.rollout.templates import system_prompt, visible_reply
from trainer.rollout.tokens import add_tokens, extend_prompt
from trainer.rollout.types import DialogueStart, RolloutConfig, RolloutEvent, RolloutRecorder, RolloutSample

log = logging.getLogger(__name__)


class DialogueRollout:
    """Runs dialogues between a policy engine and simulated users; see the module docstring."""

    def __init__(self, policy_engine: PolicyEngine, simulator_factory: SimulatorFactory,
                 config: Optional[RolloutConfig] = None, on_event: Optional[Any] = None,
                 recorder: Optional[RolloutRecorder] = None):
        """`on_event(RolloutEvent)`: called on every event (a failing listener is logged, not raised);
        `recorder`: told of every dialogue and turn first (see RolloutRecorder)."""
        self.policy_engine = policy_engine
        self.simulator_factory = simulator_factory
        self.recorder = recorder
        self.config = (config or RolloutConfig()).validate()
        self.on_event = on_event
        self._cancel = threading.Event()

    # ---- control -------------------------------------------------------------------------------
    def cancel(self) -> None:
        """Stop: every running dialogue ends as "cancelled" at the next step. Safe to call twice."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def run(self, profiles: list[Profile], group_size: int = 1, **overrides: Any) -> list[RolloutSample]:
        """Run profiles x group_size dialogues to the end (blocking); see `arun`."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(profiles, group_size, **overrides))
        raise RuntimeError("DialogueRollout.run() was called inside an event loop; await arun() instead")

    def stream(self, profiles: list[Profile], group_size: int = 1, tick_s: Optional[float] = None,
               **overrides: Any) -> Iterator[RolloutEvent]:
        """Run in a background thread and yield events as they happen (for UIs such as the live view), a "tick"
        after each `tick_s` seconds without one; ends after the last "finished". An error that stops the whole
        run is raised here. Closing the generator early (e.g. the browser went away) cancels."""
        events: queue.Queue = queue.Queue()
        previous = self.on_event

        def forward(ev: RolloutEvent) -> None:
            events.put(ev)
            if previous is not None:
                previous(ev)

        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["samples"] = asyncio.run(self.arun(profiles, group_size, **overrides))
            except BaseException as exc:  # handed to the consumer below
                outcome["error"] = exc
            finally:
                events.put(None)

        self.on_event = forward
        thread = threading.Thread(target=work, name="rollout", daemon=True)
        thread.start()
        try:
            while (ev := rollout_types.next_event(events, tick_s)) is not None:
                yield ev
        finally:
            if thread.is_alive():
                self.cancel()
                thread.join()
            self.on_event = previous
        if "error" in outcome:
            raise outcome["error"]

    async def arun(self, profiles: list[Profile], group_size: int = 1, **overrides: Any) -> list[RolloutSample]:
        """Samples in the order profiles x group members. `overrides` replace RolloutConfig fields."""
        cfg = RolloutConfig(**{**asdict(self.config), **overrides}).validate()
        if not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
        profiles = [p.validate() for p in profiles]
        if not profiles:
            raise ValueError("no profiles: pass at least one persona")
        if self.policy_engine.supports_token_ids and not (cfg.max_tokens or self.policy_engine.context_length):
            raise ValueError("max_tokens: the policy engine does not say its context length; set max_tokens")
        self.policy_engine.stop_event = self._cancel
        self.policy_engine.repetition_rule = RepetitionRule() if cfg.stop_on_repetition else None
        run_tag = uuid.uuid4().hex[:8]
        dialogues: dict[str, DialogueState] = {}
        times_played: dict[str, int] = {}  # a persona listed twice plays its next repeats, not the same seeds
        for i, profile in enumerate(profiles):
            group_id, first = f"{run_tag}-{i}", times_played.get(profile.id, 0)
            times_played[profile.id] = first + group_size
            for j in range(group_size):
                key = f"{group_id}-{j}"
                seed = rollout_types.dialogue_seed(cfg.seed, profile.id, first + j)
                dialogues[key] = self._new_dialogue(key, profile, group_id, seed, cfg)
        openings = SharedOpenings(dialogues.values(), cfg.shared_opening)
        running = {k: d for k, d in dialogues.items() if d.sample.status == "running"}
        if cfg.schedule == "async":
            await self._run_async(running, cfg, openings)
        else:
            await self._concurrently(running, {k: self._open(d, cfg, openings) for k, d in running.items()})
            await self._run_rounds(running, cfg)
        return [d.sample for d in dialogues.values()]

    async def _run_async(self, dialogues: dict[str, DialogueState], cfg: RolloutConfig,
                         openings: SharedOpenings) -> None:
        policy: BatchScheduler | ConcurrentRequests
        if self.policy_engine.supports_token_ids:
            policy = BatchScheduler(self.policy_engine, cfg.temperature, cfg.top_p, cfg.max_batch, cfg.gather_ms / 1000)
        else:
            policy = ConcurrentRequests(self.policy_engine, cfg.temperature, cfg.top_p, cfg.max_batch)
        try:
            await self._concurrently(dialogues, {k: self._play(d, cfg, openings, policy)
                                                 for k, d in dialogues.items()})
        finally:
            await policy.close()

    async def _play(self, d: DialogueState, cfg: RolloutConfig, openings: SharedOpenings,
                    policy: BatchScheduler | ConcurrentRequests) -> None:
        """One dialogue from its opening to its end, each policy turn submitted as soon as it can be."""
        await self._open(d, cfg, openings)
        while d.sample.status == "running":
            if self.cancelled:
                self._finish(d, "cancelled", "cancelled", "stopped by the user")
                return
            request = self._request(d, cfg)
            if request is None:
                return
            try:
                result = await policy.generate(request)
            except Exception as exc:  # the engine failed for the whole batch
                self._finish(d, "failed", "error", f"policy generation failed: {type(exc).__name__}: {exc}")
                return
            if result.stopped:  # Stop during generation: the cut reply is not recorded
                self._finish(d, "cancelled", "cancelled", "stopped by the user")
                return
            await self._turn_step(d, result.generation, cfg, result.latency_s)

    async def _run_rounds(self, dialogues: dict[str, DialogueState], cfg: RolloutConfig) -> None:
        while True:
            active = [d for d in dialogues.values() if d.sample.status == "running"]
            if not active:
                return
            if self.cancelled:
                for d in active:
                    self._finish(d, "cancelled", "cancelled", "stopped by the user")
                return
            requests = {d.key: r for d in active if (r := self._request(d, cfg)) is not None}
            if not requests:
                continue
            try:  # every active dialogue's policy turn in one batch
                results = await asyncio.to_thread(sample_batch, self.policy_engine, list(requests.values()),
                                                  cfg.temperature, cfg.top_p)
            except Exception as exc:  # the engine failed for the whole batch: every dialogue of it fails
                for key in requests:
                    self._finish(dialogues[key], "failed", "error",
                                 f"policy generation failed: {type(exc).__name__}: {exc}")
                continue
            if self.cancelled:  # Stop during generation: the cut replies are not recorded
                continue
            # each dialogue records its reply and asks its own simulated user, all at the same time
            await self._concurrently(dialogues, {key: self._turn_step(dialogues[key], r.generation, cfg, r.latency_s)
                                                 for key, r in zip(requests, results)})

    # ---- one dialogue's lifecycle -------------------------------------------------------------
    def _new_dialogue(self, key: str, profile: Profile, group_id: str, seed: int,
                      cfg: RolloutConfig) -> DialogueState:
        sample = RolloutSample(key=key, dialogue_id=None, profile_id=profile.id, group_id=group_id)
        d = DialogueState(key=key, profile=profile, group_id=group_id, seed=seed, sample=sample)
        try:
            d.agent = self.simulator_factory(profile, seed)
            fp = d.agent.fingerprint()
        except Exception as exc:  # a simulator that cannot be built fails its dialogue, not the run
            fp, d.agent = {}, None
            sample.status, sample.outcome = "failed", "error"
            sample.error = f"simulator could not be created: {type(exc).__name__}: {exc}"
        if self.recorder is not None:
            d.dialogue_id = self.recorder.dialogue_started(DialogueStart(
                key, profile, group_id, seed, fp, fingerprint_hash(fp) if fp else "", self.policy_engine.model_ref,
                self.policy_engine.describe(), cfg))
            sample.dialogue_id = d.dialogue_id
        self._emit("started", d)
        if sample.status == "failed":
            self._report_finished(d)
        return d

    def _record_turn(self, d: DialogueState, role: str, text: str, **fields: Any) -> None:
        turn = {"role": role, "index": len(d.messages), "text": text, **fields}
        d.messages.append({"role": role, "content": text})
        if self.recorder is not None:
            self.recorder.turn_recorded(d.dialogue_id, turn)
        self._emit("turn", d, turn=turn)

    def _finish(self, d: DialogueState, status: str, outcome: str, error: str = "") -> None:
        s = d.sample
        s.status, s.outcome, s.error = status, outcome, error
        s.final_emotion = s.emotions[-1] if s.emotions else None
        s.messages = list(d.messages)
        self._report_finished(d)

    def _report_finished(self, d: DialogueState) -> None:
        if self.recorder is not None:
            self.recorder.dialogue_finished(d.dialogue_id, d.sample)
        self._emit("finished", d, sample=d.sample)

    def _emit(self, kind: str, d: DialogueState, turn: Optional[dict] = None,
              sample: Optional[RolloutSample] = None) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(RolloutEvent(kind, d.key, d.dialogue_id, d.profile.id, d.group_id, turn, sample))
        except Exception:  # a broken listener (e.g. a closed browser tab) must not stop the rollout
            log.exception("rollout event listener failed")

    # ---- the simulator side ---------------------------------------------------------------------
    async def _concurrently(self, dialogues: dict[str, DialogueState], steps: dict[str, Awaitable]) -> None:
        """Run one step coroutine per dialogue concurrently; Stop cancels those still running."""
        if not steps:
            return
        tasks = {}
        for key, step in steps.items():
            tasks[asyncio.ensure_future(step)] = key
            # Let each step run up to its first request before starting the next: HTTP clients send the
            # body from a callback queued behind every task already ready, so 32 tasks started at once
            # would all build their requests before the first one leaves and the round waits that long.
            await asyncio.sleep(0)
        watcher = asyncio.ensure_future(self._wait_cancel())
        pending = set(tasks)
        while pending:
            done, _ = await asyncio.wait(pending | {watcher}, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
            if watcher in done:
                break
        watcher.cancel()
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task, key in tasks.items():
            d = dialogues[key]
            if d.sample.status != "running":
                continue
            if task.cancelled():
                self._finish(d, "cancelled", "cancelled", "stopped by the user")
            elif task.exception() is not None:  # a bug or a store failure: this dialogue only
                exc = task.exception()
                self._finish(d, "failed", "error", f"rollout step failed: {type(exc).__name__}: {exc}")

    async def _wait_cancel(self) -> None:
        while not self._cancel.is_set():
            await asyncio.sleep(0.05)

    async def _open(self, d: DialogueState, cfg: RolloutConfig, openings: SharedOpenings) -> None:
        """The dialogue's opening; with cfg.shared_opening only the group's first member speaks and the
        others adopt a copy of its opening."""
        leader = openings.leader(d)
        if leader is not None:
            ut = await openings.wait(d.group_id)
            if ut is None:
                self._finish(d, "failed", "error", f"the group's shared opening failed: {leader.sample.error}")
                return
            if hasattr(d.agent, "adopt_opening"):
                d.agent.adopt_opening(leader.agent)
            self._apply_user_turn(d, ut, cfg)
            return
        ut = None
        try:
            ut = await d.agent.opening()
        except Exception as exc:
            self._finish(d, "failed", "error", f"simulator failed on the opening: {type(exc).__name__}: {exc}")
            return
        finally:
            openings.spoke(d, ut)
        self._apply_user_turn(d, ut, cfg)

    async def _turn_step(self, d: DialogueState, g: Generation, cfg: RolloutConfig, latency: float) -> None:
        """Record the policy's reply, then get the simulated user's answer to it."""
        self._apply_policy_turn(d, g, cfg, latency)
        if d.sample.status != "running":
            return
        rules = getattr(d.agent, "rules", None)
        if rules is not None and not rules.judges(d.sample.n_turns):
            # SAGE's loop stops before the simulator reacts to the reply that reaches the rules' cap; a rollout
            # capped shorter than that (a 3-turn evaluation) has every reply judged
            self._finish(d, "finished", "max_turns")
            return
        try:
            ut = await d.agent.respond(list(d.messages[:-1]), d.messages[-1]["content"])
        except Exception as exc:
            self._finish(d, "failed", "error", f"simulator failed on the reply to policy turn "
                                               f"{d.sample.n_turns}: {type(exc).__name__}: {exc}")
            return
        self._apply_user_turn(d, ut, cfg)

    def _apply_user_turn(self, d: DialogueState, ut: UserTurn, cfg: RolloutConfig) -> None:
        s = d.sample
        if ut.emotion is not None:
            s.emotions.append(float(ut.emotion))
        self._record_turn(d, "user", ut.text or "", emotion=ut.emotion, delta=ut.delta, inner=ut.inner or {},
                          latency_s=float(ut.latency_s or 0.0), n_tokens=int(ut.n_tokens or 0),
                          error=ut.error or "")
        if ut.outcome == "error" or (ut.error and ut.done):
            self._finish(d, "failed", "error", f"simulator error after policy turn {s.n_turns}: {ut.error}")
        elif ut.done:
            self._finish(d, "finished", ut.outcome or "goodbye")
        elif s.n_turns >= cfg.max_turns:
            self._finish(d, "finished", "max_turns")
        elif not (ut.text or "").strip() and cfg.empty_user_message == "fail":
            self._finish(d, "failed", "error", f"simulator returned an empty message after turn {s.n_turns}")
        else:
            extend_prompt(self.policy_engine, d, cfg.mode, self._system(d, cfg))

    # ---- the policy side ----------------------------------------------------------------------
    def _request(self, d: DialogueState, cfg: RolloutConfig) -> Optional[PolicyRequest]:
        """The dialogue's next policy turn, with its own seed; None when its token budget is spent (it ends)."""
        seed = (d.seed * 7919 + d.sample.n_turns) % 2**31
        if not self.policy_engine.supports_token_ids:
            return PolicyRequest([self._system(d, cfg), *d.messages], cfg.max_new_tokens, seed, d.key)
        budget = (cfg.max_tokens or self.policy_engine.context_length) - len(d.prompt_ids)
        if budget < 1:
            self._finish(d, "finished", "max_tokens")
            return None
        return PolicyRequest(d.prompt_ids, min(cfg.max_new_tokens or budget, budget), seed, d.key)

    @staticmethod
    def _system(d: DialogueState, cfg: RolloutConfig) -> dict:
        language = d.profile.language
        return {"role": "system", "content": cfg.system_prompts.get(language) or system_prompt(cfg.mode, language)}

    def _apply_policy_turn(self, d: DialogueState, g: Generation, cfg: RolloutConfig, latency: float) -> None:
        s = d.sample
        s.n_turns += 1
        d.last_generation = g
        thought, reply, ok = visible_reply(g.text, cfg.mode, cfg.bad_think)
        s.thoughts.append(thought)
        s.reply_versions.append(g.policy_version)
        s.format_ok = s.format_ok and ok
        add_tokens(self.policy_engine, d, g)
        problems = []
        if g.finish_reason == "length":
            problems.append(f"reply cut at {len(g.token_ids)} tokens (no end of turn)")
        elif g.finish_reason == "repetition":
            problems.append(f"reply cut at {len(g.token_ids)} tokens (a degenerate loop, no end of turn)")
        if not ok:
            problems.append("no well-formed <think>...</think> block")
        self._record_turn(d, "assistant", reply, think_text=thought, n_tokens=len(g.token_ids),
                          latency_s=latency, error="; ".join(problems), policy_version=g.policy_version)
        turn = f"policy turn {s.n_turns}"
        if g.finish_reason == "error":
            self._finish(d, "failed", "error", f"{turn}: generation failed: {g.error}")
        elif not ok and cfg.bad_think == "fail":
            self._finish(d, "failed", "error", f"{turn}: the reply has no well-formed <think>...</think> block")
        elif not reply.strip() and cfg.empty_reply == "fail":
            self._finish(d, "failed", "error", f"{turn}: the policy returned an empty reply")
        elif g.finish_reason in ("length", "repetition") and cfg.truncated == "fail":
            self._finish(d, "failed", "error",
                         f"{turn}: endless reply, no end of turn within {len(g.token_ids)} tokens")
