"""The multi-turn rollout engine: many policy <-> simulated-user dialogues, run to the end.

Each round (as in the paper's multi-turn PPO, without the reference code's bugs):
  1. the policy turns of ALL active dialogues are sampled in ONE batch (`PolicyEngine.generate_ids`);
  2. every dialogue then records its reply and awaits its own simulated user, all concurrently
     (one asyncio task per dialogue; Stop cancels the tasks still waiting);
  3. dialogues that ended leave the active set. Dialogues are tracked by their key, never by their
     position in a shrinking list, so each reply always goes to its own simulated user.
Turns are written to the store as they happen (storage.dialogues), and events go to `on_event`.
With `shared_opening` the members of a group start from one opening: the first member's simulated user
speaks and the others adopt it (RLVER clones a group's simulators from one that has already spoken).

The data classes live in trainer/rollout_types.py.

Token bookkeeping. A turn's prompt is built from token ids, never by re-tokenising earlier output:
prompt[t+1] = prompt[t] + kept[t] + ids(template text between the reply and the next assistant header).
Direct mode: kept[t] = the sampled ids, so the whole dialogue is one causal sequence in which every
sampled token sits after exactly the context it was sampled with. Think mode: as in the paper the later
prompts drop earlier thoughts (kept[t] = ids of the visible reply), so a turn's sampled thought is not in
later prompts; the sample then holds one *segment* per turn (its prompt + its sampled ids). Each segment
is a causal sequence of its own; `RolloutSample.rows()` gives them for log-prob recomputation, and
`input_ids` is their concatenation (one segment in direct mode: the dialogue).
"""
from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import queue
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Optional

from simulator.profiles import Profile
from storage import dialogues as store_dialogues
from trainer.engines.base import Generation, PolicyEngine, SamplingConfig
from trainer.rollout_types import RolloutConfig, RolloutEvent, RolloutSample
from trainer.templates import system_prompt, visible_reply

log = logging.getLogger(__name__)
_PLACEHOLDER = "\x00REPLY\x00"


@dataclass
class _Dialogue:
    key: str
    profile: Profile
    group_id: str
    seed: int
    agent: Any
    dialogue_id: Optional[int] = None
    messages: list[dict] = field(default_factory=list)
    prompt_ids: list[int] = field(default_factory=list)
    sample: Optional[RolloutSample] = None
    open_segment: list[int] = field(default_factory=list)  # ids of the segment being extended
    last_generation: Optional[Generation] = None


class RolloutEngine:
    """Runs dialogues between a policy engine and simulated users; see the module docstring."""

    def __init__(self, engine: PolicyEngine, simulator_factory: Callable[..., Any], store: Any = None,
                 config: Optional[RolloutConfig] = None, on_event: Optional[Callable[[RolloutEvent], None]] = None):
        self.engine = engine
        self.simulator_factory = simulator_factory
        self.store = store
        self.config = (config or RolloutConfig()).validate()
        self.on_event = on_event
        self._cancel = threading.Event()
        self._cfg = self.config
        self._factory_takes_seed = len(inspect.signature(simulator_factory).parameters) >= 2

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
        self._cfg = cfg
        self.engine.stop_event = self._cancel
        run_tag = uuid.uuid4().hex[:8]
        dialogues: dict[str, _Dialogue] = {}
        for i, profile in enumerate(profiles):
            group_id = f"{run_tag}-{i}"
            for j in range(group_size):
                key = f"{group_id}-{j}"
                seed = cfg.seed * 100_003 + i * group_size + j
                dialogues[key] = self._new_dialogue(key, profile, group_id, seed, cfg)
        await self._openings(dialogues, cfg)
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
    def _new_dialogue(self, key: str, profile: Profile, group_id: str, seed: int, cfg: RolloutConfig) -> _Dialogue:
        sample = RolloutSample(key=key, dialogue_id=None, profile_id=profile.id, group_id=group_id)
        d = _Dialogue(key=key, profile=profile, group_id=group_id, seed=seed, agent=None, sample=sample)
        try:
            d.agent = (self.simulator_factory(profile, seed) if self._factory_takes_seed
                       else self.simulator_factory(profile))
            fp = d.agent.fingerprint() if hasattr(d.agent, "fingerprint") else {}
        except Exception as exc:  # a simulator that cannot be built fails its dialogue, not the run
            fp, d.agent = {}, None
            sample.status, sample.outcome = "failed", "error"
            sample.error = f"simulator could not be created: {type(exc).__name__}: {exc}"
        if self.store is not None:
            from simulator.fingerprint import fingerprint_hash

            d.dialogue_id = store_dialogues.start_dialogue(
                self.store, persona_id=profile.id, persona_snapshot=profile.to_dict(), source=cfg.source,
                policy_ref=self.engine.model_ref, mode=cfg.mode, simulator_fingerprint=fp,
                fingerprint_hash=fingerprint_hash(fp) if fp else "", job_id=cfg.job_id, step=cfg.step,
                eval_run_id=cfg.eval_run_id,
                group_id=group_id, seed=seed,
                config={"rollout": asdict(cfg), "policy": self.engine.describe()})
            sample.dialogue_id = d.dialogue_id
        self._emit("started", d)
        if sample.status == "failed":
            self._store_finish(d)
            self._emit("finished", d, sample=sample)
        return d

    def _record_turn(self, d: _Dialogue, role: str, text: str, **fields: Any) -> None:
        index = len(d.messages)
        d.messages.append({"role": role, "content": text})
        if self.store is not None:
            store_dialogues.add_turn(self.store, d.dialogue_id, index, role, text,
                                     **{k: v for k, v in fields.items() if k != "done"})
        self._emit("turn", d, turn={"role": role, "index": index, "text": text, **fields})

    def _finish(self, d: _Dialogue, status: str, outcome: str, error: str = "") -> None:
        s = d.sample
        s.status, s.outcome, s.error = status, outcome, error
        s.final_emotion = s.emotions[-1] if s.emotions else None
        reward = max((s.final_emotion or 0.0) / 100.0, 0.0)
        if not s.format_ok:
            reward -= self._cfg.bad_think_penalty
        s.reward = reward
        s.messages = list(d.messages)
        self._store_finish(d)
        self._emit("finished", d, sample=s)

    def _store_finish(self, d: _Dialogue) -> None:
        if self.store is not None:
            s = d.sample
            store_dialogues.finish_dialogue(self.store, d.dialogue_id, s.status, s.final_emotion,
                                            outcome=s.outcome, error=s.error)

    def _emit(self, kind: str, d: _Dialogue, turn: Optional[dict] = None,
              sample: Optional[RolloutSample] = None) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(RolloutEvent(kind, d.key, d.dialogue_id, d.profile.id, d.group_id, turn, sample))
        except Exception:  # a broken listener (e.g. a closed browser tab) must not stop the rollout
            log.exception("rollout event listener failed")

    # ---- the simulator side ---------------------------------------------------------------------
    async def _concurrently(self, dialogues: dict[str, _Dialogue], steps: dict[str, Any]) -> None:
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

    async def _openings(self, dialogues: dict[str, _Dialogue], cfg: RolloutConfig) -> None:
        """Every running dialogue's opening; with cfg.shared_opening one per group, copied to its members."""
        active = [d for d in dialogues.values() if d.sample.status == "running"]
        first: dict[str, _Dialogue] = {}
        for d in active:
            first.setdefault(d.group_id, d)
        speakers = list(first.values()) if cfg.shared_opening else active
        openings: dict[str, Any] = {}
        await self._concurrently(dialogues, {d.key: self._opening_step(d, cfg, openings) for d in speakers})
        for d in active:
            if d.sample.status != "running" or d.key in openings:
                continue
            leader = first[d.group_id]
            if leader.key not in openings:
                self._finish(d, "failed", "error", f"the group's shared opening failed: {leader.sample.error}")
                continue
            if hasattr(d.agent, "adopt_opening"):
                d.agent.adopt_opening(leader.agent)
            self._apply_user_turn(d, copy.deepcopy(openings[leader.key]), cfg)

    async def _opening_step(self, d: _Dialogue, cfg: RolloutConfig, openings: dict[str, Any]) -> None:
        try:
            ut = await d.agent.opening()
        except Exception as exc:
            self._finish(d, "failed", "error", f"simulator failed on the opening: {type(exc).__name__}: {exc}")
            return
        openings[d.key] = copy.deepcopy(ut)
        self._apply_user_turn(d, ut, cfg)

    async def _turn_step(self, d: _Dialogue, g: Generation, cfg: RolloutConfig, latency: float) -> None:
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

    def _apply_user_turn(self, d: _Dialogue, ut: Any, cfg: RolloutConfig) -> None:
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
            self._extend_prompt(d, cfg)

    # ---- the policy side ----------------------------------------------------------------------
    def _extend_prompt(self, d: _Dialogue, cfg: RolloutConfig) -> None:
        """prompt ids for the next policy turn, built from the previous prompt and the kept reply ids."""
        if not self.engine.supports_token_ids:
            return
        if d.last_generation is None:  # first turn: system prompt + opening, rendered once
            d.prompt_ids = self.engine.encode_chat([self._system(d, cfg), *d.messages])
            return
        g, reply = d.last_generation, d.messages[-2]["content"]
        # The policy's own history keeps its sampled ids; only a think block removed from it (think mode)
        # makes us encode the visible reply instead.
        keep_sampled = cfg.mode == "direct" or (not d.sample.thoughts[-1] and reply == g.text)
        kept = list(g.token_ids) if keep_sampled else self.engine.encode_text(reply)
        ended = keep_sampled and bool(kept) and kept[-1] == self.engine.eos_token_id
        d.prompt_ids = d.prompt_ids + kept + self.engine.encode_text(self._between(d, ended))

    def _between(self, d: _Dialogue, reply_has_eos: bool) -> str:
        """Template text from the end of the last reply to the next assistant header (incl. new user turn)."""
        history = [{"role": "system", "content": "s"}, *d.messages[:-2],
                   {"role": "assistant", "content": _PLACEHOLDER}]
        before = self.engine.render(history, add_generation_prompt=False)
        after = self.engine.render(history + [d.messages[-1]], add_generation_prompt=True)
        if not after.startswith(before):
            raise RuntimeError("the chat template does not render histories as prefixes of each other")
        text = before[before.rindex(_PLACEHOLDER) + len(_PLACEHOLDER):] + after[len(before):]
        eos_text = self.engine.tokenizer.eos_token or ""
        if reply_has_eos and eos_text and text.startswith(eos_text):
            text = text[len(eos_text):]
        return text

    async def _policy_round(self, dialogues: dict[str, _Dialogue], keys: list[str], cfg: RolloutConfig,
                            round_index: int) -> list[tuple[_Dialogue, Generation, float]]:
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
    def _system(d: _Dialogue, cfg: RolloutConfig) -> dict:
        language = d.profile.language
        return {"role": "system", "content": cfg.system_prompts.get(language) or system_prompt(cfg.mode, language)}

    def _clip(self, g: Generation, budget: Optional[int]) -> Generation:
        """Cut a generation to its dialogue's token budget (the batch may have sampled further)."""
        if budget is None or len(g.token_ids) <= budget:
            return g
        ids = g.token_ids[:budget]
        return Generation(text=self.engine.decode(ids), token_ids=ids, logprobs=g.logprobs[:budget],
                          prompt_ids=g.prompt_ids, finish_reason="length")

    def _apply_policy_turn(self, d: _Dialogue, g: Generation, cfg: RolloutConfig, latency: float) -> None:
        s = d.sample
        s.n_turns += 1
        d.last_generation = g
        thought, reply, ok = visible_reply(g.text, cfg.mode, cfg.bad_think)
        s.thoughts.append(thought)
        s.format_ok = s.format_ok and ok
        self._add_tokens(d, g)
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

    def _add_tokens(self, d: _Dialogue, g: Generation) -> None:
        """Append the turn's prompt (as new context) and sampled ids to the sample's token layout."""
        if not self.engine.supports_token_ids:
            return
        s = d.sample
        prompt = g.prompt_ids or d.prompt_ids
        if d.open_segment and prompt[:len(d.open_segment)] == d.open_segment:
            new_context = prompt[len(d.open_segment):]  # the same causal sequence continues
            seg_start = s.segments.pop()[0]
        else:
            new_context, seg_start = list(prompt), len(s.input_ids)  # a new segment (think mode)
            d.open_segment = []
        s.input_ids += new_context
        s.action_mask += [0] * len(new_context)
        s.old_logprobs += [0.0] * len(new_context)
        start = len(s.input_ids)
        s.input_ids += list(g.token_ids)
        s.action_mask += [1] * len(g.token_ids)
        s.old_logprobs += list(g.logprobs)
        s.turn_spans.append((start, len(s.input_ids)))
        s.segments.append((seg_start, len(s.input_ids)))
        d.open_segment = d.open_segment + new_context + list(g.token_ids)


def make_simulator_factory(spec: str = "offline", rules: Any = "rlver-hard", pack: str = "own", **backend_kw: Any
                           ) -> Callable[[Profile, int], Any]:
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

    def factory(profile: Profile, seed: int) -> Any:
        return SentientAgent(profile, backend, rules_obj, seed=seed, pack=prompts)

    return factory
