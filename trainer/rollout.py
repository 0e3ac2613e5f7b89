"""The multi-turn rollout engine: many policy <-> simulated-user dialogues, run to the end.

Each round (as in the paper's multi-turn PPO, without the reference code's bugs):
  1. the policy turns of ALL active dialogues are sampled in ONE batch (`PolicyEngine.generate_ids`);
  2. every dialogue then records its reply and awaits its own simulated user, all concurrently
     (one asyncio task per dialogue; Stop cancels the tasks still waiting);
  3. dialogues that ended leave the active set. Dialogues are tracked by their key, never by their
     position in a shrinking list, so each reply always goes to its own simulated user.
The rollout knows no store: a `recorder` (trainer.rollout_types.RolloutRecorder, e.g.
storage.recorder.DialogueRecorder) is told of every dialogue and turn as it happens, then events go to
`on_event`. Samples carry emotions, the final emotion and format flags; the reward is computed by the
training step (trainer.algorithms.rlver_reward).
With `shared_opening` the members of a group start from one opening: the first member's simulated user
speaks and the others adopt it (RLVER clones a group's simulators from one that has already spoken).

The data classes live in trainer/rollout_types.py, the token bookkeeping in trainer/rollout_tokens.py.
"""
from __future__ import annotations

import asyncio
import copy
import logging
import queue
import threading
import time
import uuid
from dataclasses import asdict
from typing import Any, Awaitable, Iterator, Optional

from simulator.agent import SimulatorFactory, UserTurn
from simulator.profiles import Profile
from trainer.engines.base import Generation, PolicyEngine, SamplingConfig
from trainer.rollout_tokens import DialogueState, add_tokens, extend_prompt
from trainer.rollout_types import DialogueStart, RolloutConfig, RolloutEvent, RolloutRecorder, RolloutSample
from trainer.templates import system_prompt, visible_reply

log = logging.getLogger(__name__)


class RolloutEngine:
    """Runs dialogues between a policy engine and simulated users; see the module docstring."""

    def __init__(self, engine: PolicyEngine, simulator_factory: SimulatorFactory,
                 config: Optional[RolloutConfig] = None, on_event: Optional[Any] = None,
                 recorder: Optional[RolloutRecorder] = None):
        """`on_event(RolloutEvent)`: called on every event (a failing listener is logged, not raised);
        `recorder`: told of every dialogue and turn first (see RolloutRecorder)."""
        self.engine = engine
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
        raise RuntimeError("RolloutEngine.run() was called inside an event loop; await arun() instead")

    def stream(self, profiles: list[Profile], group_size: int = 1, **overrides: Any) -> Iterator[RolloutEvent]:
        """Run in a background thread and yield events as they happen (for UIs such as the live view).

        Ends after the last "finished" event; an error that stops the whole run (bad profiles, bad
        config) is raised here. Closing the generator early (e.g. the browser went away) cancels."""
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
            while (ev := events.get()) is not None:
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
        self.engine.stop_event = self._cancel
        run_tag = uuid.uuid4().hex[:8]
        dialogues: dict[str, DialogueState] = {}
        for i, profile in enumerate(profiles):
            group_id = f"{run_tag}-{i}"
            for j in range(group_size):
                key = f"{group_id}-{j}"
                seed = cfg.seed * 100_003 + i * group_size + j
                dialogues[key] = self._new_dialogue(key, profile, group_id, seed, cfg)
        openings = _SharedOpenings(dialogues.values(), cfg.shared_opening)
        await self._concurrently(dialogues, {k: self._open(d, cfg, openings) for k, d in dialogues.items()
                                             if d.sample.status == "running"})
        round_index = 0
        while True:
            active = [k for k, d in dialogues.items() if d.sample.status == "running"]
            if not active:
                break
            if self.cancelled:
                for k in active:
                    self._finish(dialogues[k], "cancelled", "cancelled", "stopped by the user")
                break
            replies = await self._policy_round(dialogues, active, cfg, round_index)
            if self.cancelled:  # Stop during generation: the cut replies are not recorded
                continue
            # each dialogue records its reply and asks its own simulated user, all at the same time
            await self._concurrently(dialogues, {d.key: self._turn_step(d, g, cfg, latency)
                                                 for d, g, latency in replies})
            round_index += 1
        return [d.sample for d in dialogues.values()]

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
                key, profile, group_id, seed, fp, self.engine.model_ref, self.engine.describe(), cfg))
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

    async def _open(self, d: DialogueState, cfg: RolloutConfig, openings: "_SharedOpenings") -> None:
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
        elif not (ut.text or "").strip():
            self._finish(d, "failed", "error", f"simulator returned an empty message after turn {s.n_turns}")
        else:
            extend_prompt(self.engine, d, cfg.mode, self._system(d, cfg))

    # ---- the policy side ----------------------------------------------------------------------
    async def _policy_round(self, dialogues: dict[str, DialogueState], keys: list[str], cfg: RolloutConfig,
                            round_index: int) -> list[tuple[DialogueState, Generation, float]]:
        """Sample the next policy turn of every active dialogue in one batch: (dialogue, reply, latency)."""
        batch = []
        limit = cfg.max_tokens or self.engine.context_length
        for k in keys:
            d = dialogues[k]
            if not self.engine.supports_token_ids:
                batch.append((d, cfg.max_new_tokens))
                continue
            if limit is None:
                raise ValueError("max_tokens: the policy engine does not say its context length; set max_tokens")
            budget = limit - len(d.prompt_ids)
            if budget < 1:
                self._finish(d, "finished", "max_tokens")
            else:
                batch.append((d, min(cfg.max_new_tokens or budget, budget)))
        if not batch:
            return []
        caps = [b for _, b in batch]
        params = SamplingConfig(cfg.temperature, cfg.top_p, None if None in caps else max(caps),
                                None if cfg.seed is None else cfg.seed * 7919 + round_index)
        t0 = time.monotonic()
        try:
            if self.engine.supports_token_ids:
                gens = await asyncio.to_thread(self.engine.generate_ids, [d.prompt_ids for d, _ in batch], params)
            else:
                gens = await asyncio.to_thread(self.engine.generate,
                                               [[self._system(d, cfg), *d.messages] for d, _ in batch], params)
        except Exception as exc:  # the engine failed for the whole batch: every dialogue of it fails
            for d, _ in batch:
                self._finish(d, "failed", "error", f"policy generation failed: {type(exc).__name__}: {exc}")
            return []
        latency = (time.monotonic() - t0) / len(batch)
        return [(d, self._clip(g, budget), latency) for (d, budget), g in zip(batch, gens)]

    @staticmethod
    def _system(d: DialogueState, cfg: RolloutConfig) -> dict:
        language = d.profile.language
        return {"role": "system", "content": cfg.system_prompts.get(language) or system_prompt(cfg.mode, language)}

    def _clip(self, g: Generation, budget: Optional[int]) -> Generation:
        """Cut a generation to its dialogue's token budget (the batch may have sampled further)."""
        if budget is None or len(g.token_ids) <= budget:
            return g
        ids = g.token_ids[:budget]
        return Generation(text=self.engine.decode(ids), token_ids=ids, logprobs=g.logprobs[:budget],
                          prompt_ids=g.prompt_ids, finish_reason="length")

    def _apply_policy_turn(self, d: DialogueState, g: Generation, cfg: RolloutConfig, latency: float) -> None:
        s = d.sample
        s.n_turns += 1
        d.last_generation = g
        thought, reply, ok = visible_reply(g.text, cfg.mode, cfg.bad_think)
        s.thoughts.append(thought)
        s.format_ok = s.format_ok and ok
        add_tokens(self.engine, d, g)
        problems = []
        if g.finish_reason == "length":
            problems.append(f"reply cut at {len(g.token_ids)} tokens (no end of turn)")
        if not ok:
            problems.append("no well-formed <think>...</think> block")
        self._record_turn(d, "assistant", reply, think_text=thought, n_tokens=len(g.token_ids),
                          latency_s=latency, error="; ".join(problems))
        turn = f"policy turn {s.n_turns}"
        if g.finish_reason == "error":
            self._finish(d, "failed", "error", f"{turn}: generation failed: {g.error}")
        elif not ok and cfg.bad_think == "fail":
            self._finish(d, "failed", "error", f"{turn}: the reply has no well-formed <think>...</think> block")
        elif not reply.strip() and cfg.empty_reply == "fail":
            self._finish(d, "failed", "error", f"{turn}: the policy returned an empty reply")
        elif g.finish_reason == "length" and cfg.truncated == "fail":
            self._finish(d, "failed", "error",
                         f"{turn}: endless reply, no end of turn within {len(g.token_ids)} tokens")


class _SharedOpenings:
    """With a shared opening, which member of a group speaks (the first one still running) and the opening
    it said, handed to the others (a copy each); without one, every dialogue speaks for itself."""

    def __init__(self, dialogues: Any, shared: bool):
        self.leaders: dict[str, DialogueState] = {}
        self.said: dict[str, asyncio.Future] = {}
        if shared:
            for d in dialogues:
                if d.sample.status == "running":
                    self.leaders.setdefault(d.group_id, d)

    def leader(self, d: DialogueState) -> Optional[DialogueState]:
        """The dialogue whose opening `d` adopts, or None when `d` speaks for itself."""
        leader = self.leaders.get(d.group_id)
        return None if leader is None or leader is d else leader

    def _future(self, group_id: str) -> asyncio.Future:
        return self.said.setdefault(group_id, asyncio.get_running_loop().create_future())

    def spoke(self, d: DialogueState, opening: Optional[UserTurn]) -> None:
        """`d` said `opening` (None: it failed)."""
        if self.leaders.get(d.group_id) is d and not self._future(d.group_id).done():
            self._future(d.group_id).set_result(copy.deepcopy(opening))

    async def wait(self, group_id: str) -> Optional[UserTurn]:
        return copy.deepcopy(await asyncio.shield(self._future(group_id)))


def make_simulator_factory(spec: str = "offline", rules: Any = "rlver-hard", pack: str = "own", **backend_kw: Any
                           ) -> SimulatorFactory:
    """factory(profile, seed) -> SentientAgent sharing one backend (spec "offline", "openai:MODEL" or
    "replay:FILE") and one prompt pack ("own" or "sage:DIR", see simulator.prompt_packs).

    `rules` is a preset name of simulator.rules.PRESETS or an EmotionRules object."""
    from simulator.agent import SentientAgent
    from simulator.backends import make_backend
    from simulator.rules import EmotionRules, get_preset
    from simulator.prompt_packs import load_pack

    rules_obj = rules if isinstance(rules, EmotionRules) else get_preset(rules)
    backend = make_backend(spec, **backend_kw)
    prompts = load_pack(pack)

    def factory(profile: Profile, seed: int) -> SentientAgent:
        return SentientAgent(profile, backend, rules_obj, seed=seed, pack=prompts)

    return factory
