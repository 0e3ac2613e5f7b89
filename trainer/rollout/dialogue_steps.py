"""The steps of one dialogue in a rollout run (trainer.rollout.dialogue_rollout decides when each is taken):
its start (the simulated user built, the recorder told), its opening, each policy turn's request, the
policy's reply and the simulated user's answer to it, and its end. Every turn is recorded and reported as it
happens: first to the recorder (trainer.rollout.types.RolloutRecorder), then as a RolloutEvent to `emit`.
The rules that end a dialogue live here too: the user's goodbye or error, max_turns, the token budget, and
the reply checks (empty, cut, no well-formed think block) the config turns into failures.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from simulator.llm.hashing import fingerprint_hash
from simulator.personas.profile import Profile
from simulator.user.agent import SimulatorFactory, UserTurn
from trainer.policies.base import Generation, PolicyEngine
from trainer.policies.scheduler import PolicyRequest
from trainer.rollout.state import DialogueState, SharedOpenings
from trainer.rollout.templates import system_prompt, visible_reply
from trainer.rollout.tokens import add_tokens, extend_prompt
from trainer.rollout.types import DialogueStart, RolloutConfig, RolloutEvent, RolloutRecorder, RolloutSample


class DialogueSteps:
    """One run's dialogue steps, with the run's settings (`config`); `emit(RolloutEvent)` is called on every
    event after the recorder (if any) was told."""

    def __init__(self, policy_engine: PolicyEngine, simulator_factory: SimulatorFactory, config: RolloutConfig,
                 recorder: Optional[RolloutRecorder], emit: Callable[[RolloutEvent], None]):
        self.policy_engine = policy_engine
        self.simulator_factory = simulator_factory
        self.config = config
        self.recorder = recorder
        self.emit = emit

    # ---- one dialogue's lifecycle -------------------------------------------------------------
    def start(self, key: str, profile: Profile, group_id: str, seed: int) -> DialogueState:
        """A new dialogue with its simulated user; one whose simulator cannot be built has already failed."""
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
                self.policy_engine.describe(), self.config))
            sample.dialogue_id = d.dialogue_id
        self._emit("started", d)
        if sample.status == "failed":
            self._report_finished(d)
        return d

    def finish(self, d: DialogueState, status: str, outcome: str, error: str = "") -> None:
        """End the dialogue: its sample takes the status, outcome and transcript; the recorder and listener
        are told."""
        s = d.sample
        s.status, s.outcome, s.error = status, outcome, error
        s.final_emotion = s.emotions[-1] if s.emotions else None
        s.messages = list(d.messages)
        self._report_finished(d)

    def _record_turn(self, d: DialogueState, role: str, text: str, **fields: Any) -> None:
        turn = {"role": role, "index": len(d.messages), "text": text, **fields}
        d.messages.append({"role": role, "content": text})
        if self.recorder is not None:
            self.recorder.turn_recorded(d.dialogue_id, turn)
        self._emit("turn", d, turn=turn)

    def _report_finished(self, d: DialogueState) -> None:
        if self.recorder is not None:
            self.recorder.dialogue_finished(d.dialogue_id, d.sample)
        self._emit("finished", d, sample=d.sample)

    def _emit(self, kind: str, d: DialogueState, turn: Optional[dict] = None,
              sample: Optional[RolloutSample] = None) -> None:
        self.emit(RolloutEvent(kind, d.key, d.dialogue_id, d.profile.id, d.group_id, turn, sample))

    # ---- the simulator side ---------------------------------------------------------------------
    async def open(self, d: DialogueState, openings: SharedOpenings) -> None:
        """The dialogue's opening; with config.shared_opening only the group's first member speaks and the
        others adopt a copy of its opening."""
        leader = openings.leader(d)
        if leader is not None:
            ut = await openings.wait(d.group_id)
            if ut is None:
                self.finish(d, "failed", "error", f"the group's shared opening failed: {leader.sample.error}")
                return
            if hasattr(d.agent, "adopt_opening"):
                d.agent.adopt_opening(leader.agent)
            self._apply_user_turn(d, ut)
            return
        ut = None
        try:
            ut = await d.agent.opening()
        except Exception as exc:
            self.finish(d, "failed", "error", f"simulator failed on the opening: {type(exc).__name__}: {exc}")
            return
        finally:
            openings.spoke(d, ut)
        self._apply_user_turn(d, ut)

    async def turn_step(self, d: DialogueState, g: Generation, latency: float) -> None:
        """Record the policy's reply, then get the simulated user's answer to it."""
        self._apply_policy_turn(d, g, latency)
        if d.sample.status != "running":
            return
        rules = getattr(d.agent, "rules", None)
        if rules is not None and not rules.judges(d.sample.n_turns):
            # SAGE's loop stops before the simulator reacts to the reply that reaches the rules' cap; a rollout
            # capped shorter than that (a 3-turn evaluation) has every reply judged
            self.finish(d, "finished", "max_turns")
            return
        try:
            ut = await d.agent.respond(list(d.messages[:-1]), d.messages[-1]["content"])
        except Exception as exc:
            self.finish(d, "failed", "error", f"simulator failed on the reply to policy turn "
                                              f"{d.sample.n_turns}: {type(exc).__name__}: {exc}")
            return
        self._apply_user_turn(d, ut)

    def _apply_user_turn(self, d: DialogueState, ut: UserTurn) -> None:
        cfg, s = self.config, d.sample
        if ut.emotion is not None:
            s.emotions.append(float(ut.emotion))
        self._record_turn(d, "user", ut.text or "", emotion=ut.emotion, delta=ut.delta, inner=ut.inner or {},
                          latency_s=float(ut.latency_s or 0.0), n_tokens=int(ut.n_tokens or 0),
                          error=ut.error or "")
        if ut.outcome == "error" or (ut.error and ut.done):
            self.finish(d, "failed", "error", f"simulator error after policy turn {s.n_turns}: {ut.error}")
        elif ut.done:
            self.finish(d, "finished", ut.outcome or "goodbye")
        elif s.n_turns >= cfg.max_turns:
            self.finish(d, "finished", "max_turns")
        elif not (ut.text or "").strip() and cfg.empty_user_message == "fail":
            self.finish(d, "failed", "error", f"simulator returned an empty message after turn {s.n_turns}")
        else:
            extend_prompt(self.policy_engine, d, cfg.mode, self._system(d))

    # ---- the policy side ----------------------------------------------------------------------
    def request(self, d: DialogueState) -> Optional[PolicyRequest]:
        """The dialogue's next policy turn, with its own seed; None when its token budget is spent (it ends)."""
        cfg = self.config
        seed = (d.seed * 7919 + d.sample.n_turns) % 2**31
        if not self.policy_engine.supports_token_ids:
            return PolicyRequest([self._system(d), *d.messages], cfg.max_new_tokens, seed, d.key)
        budget = (cfg.max_tokens or self.policy_engine.context_length) - len(d.prompt_ids)
        if budget < 1:
            self.finish(d, "finished", "max_tokens")
            return None
        return PolicyRequest(d.prompt_ids, min(cfg.max_new_tokens or budget, budget), seed, d.key)

    def _system(self, d: DialogueState) -> dict:
        language = d.profile.language
        return {"role": "system",
                "content": self.config.system_prompts.get(language) or system_prompt(self.config.mode, language)}

    def _apply_policy_turn(self, d: DialogueState, g: Generation, latency: float) -> None:
        cfg, s = self.config, d.sample
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
            self.finish(d, "failed", "error", f"{turn}: generation failed: {g.error}")
        elif not ok and cfg.bad_think == "fail":
            self.finish(d, "failed", "error", f"{turn}: the reply has no well-formed <think>...</think> block")
        elif not reply.strip() and cfg.empty_reply == "fail":
            self.finish(d, "failed", "error", f"{turn}: the policy returned an empty reply")
        elif g.finish_reason in ("length", "repetition") and cfg.truncated == "fail":
            self.finish(d, "failed", "error",
                        f"{turn}: endless reply, no end of turn within {len(g.token_ids)} tokens")
