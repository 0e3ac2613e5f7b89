"""DialogueRollout on the tiny model: batching, dialogues ending at different turns, exact token layout,
think stripping, the store, events, Stop, and bad input."""
from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import torch
from helpers import BACKENDS
from scripted_rollout import Factory, RecordingEngine, ScriptedAgent, ScriptedPolicy, profile, recompute

from simulator.llm.traffic import TrafficLimits
from simulator.user.agent import UserTurn
from storage.dialogues import load_dialogue
from storage.recorder import DialogueRecorder
from trainer.learning.algorithms import rlver_reward
from trainer.policies.hf_engine import HFEngine
from trainer.rollout.dialogue_rollout import DialogueRollout, RolloutConfig


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return RecordingEngine(tiny_model_dir)


@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)
def test_one_batch_per_round_and_dialogues_ending_at_different_turns(policy, store):
    policy.batches.clear()
    factory = Factory({"ann": 1, "bob": 2, "cat": 3})
    rollout = DialogueRollout(policy, factory, recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_turns=8, max_new_tokens=6, seed=1, schedule="rounds"))
    samples = rollout.run([profile("ann"), profile("bob"), profile("cat")], group_size=2)
    assert policy.batches == [6, 4, 2]  # every round: all active dialogues in one batch
    assert [s.profile_id for s in samples] == ["ann", "ann", "bob", "bob", "cat", "cat"]
    assert [s.n_turns for s in samples] == [1, 1, 2, 2, 3, 3]
    assert len({s.group_id for s in samples}) == 3
    for s in samples:
        assert s.status == "finished" and s.outcome == "goodbye" and s.error == ""
        # each simulated user got exactly the replies of its own dialogue (tracked by id, not position)
        agent = next(a for a in factory.agents.values() if a.received == [m["content"] for m in s.messages
                                                                          if m["role"] == "assistant"])
        assert agent.profile.id == s.profile_id
        assert agent.histories[-1] == s.messages[:-2]  # visible history before the reply
        assert s.emotions == [30.0 + 5 * i for i in range(s.n_turns + 1)]
        assert s.final_emotion == s.emotions[-1] and rlver_reward(s) == pytest.approx(s.final_emotion / 100)
        stored = load_dialogue(store, s.dialogue_id)
        assert stored["status"] == "finished" and stored["n_turns"] == s.n_turns
        assert stored["group_id"] == s.group_id and stored["mode"] == "direct"
        assert stored["policy_ref"] == str(policy.path) and stored["fingerprint_hash"]
        assert [t["role"] for t in stored["turns"]] == ["user", "assistant"] * s.n_turns + ["user"]
        assert [t["text"] for t in stored["turns"]] == [m["content"] for m in s.messages]


def test_direct_mode_tokens_are_exact(policy):
    factory = Factory({"ann": 3, "bob": 2})
    rollout = DialogueRollout(policy, factory, config=RolloutConfig(max_new_tokens=8, seed=2))
    for s in rollout.run([profile("ann"), profile("bob")], group_size=1):
        assert len(s.segments) == 1  # direct mode: the dialogue is one causal sequence
        assert len(s.input_ids) == len(s.action_mask) == len(s.old_logprobs)
        assert len(s.turn_spans) == s.n_turns
        masked = [i for i, m in zip(s.input_ids, s.action_mask) if m]
        assert masked == [t for a, b in s.turn_spans for t in s.input_ids[a:b]]
        replies = [m["content"] for m in s.messages if m["role"] == "assistant"]
        for (a, b), reply in zip(s.turn_spans, replies):
            assert policy.decode(s.input_ids[a:b]).strip() == reply.strip()
        # every sampled token sits after exactly the context it was sampled with
        ids, mask, old = s.rows()[0]
        new = recompute(policy, ids)
        pos = [i - 1 for i, m in enumerate(mask) if m]
        assert torch.allclose(new[pos], torch.tensor([old[i + 1] for i in pos]), atol=1e-4)
        # user turns the policy answered are in the sequence but never masked in
        user_text = policy.decode([i for i, m in zip(ids, mask) if not m])
        assert all(m["content"] in user_text for m in s.messages[:-1] if m["role"] == "user")
        assert s.messages[-1]["content"] not in user_text  # the user's last message got no reply


def test_think_mode_strips_earlier_thoughts_with_exact_segments(tiny_model_dir):
    texts = {1: "<think>She feels unseen.</think>That sounds exhausting.",
             2: "<think>Ask gently.</think>What hurt the most?",
             3: "no think block here"}
    pol = ScriptedPolicy(tiny_model_dir, lambda n: texts[min(n, 3)])
    rollout = DialogueRollout(pol, Factory({"ann": 3}), config=RolloutConfig(mode="think", max_new_tokens=64))
    [s] = rollout.run([profile("ann")])
    assert [m["content"] for m in s.messages if m["role"] == "assistant"] == \
        ["That sounds exhausting.", "What hurt the most?", "no think block here"]
    assert s.thoughts == ["She feels unseen.", "Ask gently.", ""]
    assert s.format_ok is False  # turn 3 broke the format ("penalize": kept, flagged)
    rows = s.rows()
    assert len(rows) == 3  # the thought of turn 1 is not in turn 2's prompt: a new segment per turn
    for t, (ids, mask, old) in enumerate(rows):
        prompt = policy_text = pol.tokenizer.decode([i for i, m in zip(ids, mask) if not m])
        assert "She feels unseen" not in prompt and "Ask gently" not in policy_text
        if t > 0:
            assert "That sounds exhausting." in prompt
        sampled = [i for i, m in zip(ids, mask) if m]
        assert pol.decode(sampled) == texts[t + 1]
        new = recompute(pol, ids)
        pos = [i - 1 for i, m in enumerate(mask) if m]
        assert torch.allclose(new[pos], torch.tensor([old[i + 1] for i in pos]), atol=1e-4)


def test_bad_think_fail_policy_and_empty_reply(tiny_model_dir, store):
    pol = ScriptedPolicy(tiny_model_dir, lambda n: "just words")
    rollout = DialogueRollout(pol, Factory({"ann": 3}), recorder=DialogueRecorder(store),
                            config=RolloutConfig(mode="think", bad_think="fail"))
    [s] = rollout.run([profile("ann")])
    assert s.status == "failed" and s.outcome == "error" and "policy turn 1" in s.error and "<think>" in s.error
    assert load_dialogue(store, s.dialogue_id)["error"] == s.error
    empty = ScriptedPolicy(tiny_model_dir, lambda n: "   ")
    [s] = DialogueRollout(empty, Factory({"ann": 3}), recorder=DialogueRecorder(store)).run([profile("ann")])
    assert s.status == "failed" and "empty reply" in s.error
    assert load_dialogue(store, s.dialogue_id)["status"] == "failed"


def test_endless_reply_and_token_budget(policy, store):
    rollout = DialogueRollout(policy, Factory({"ann": 5}), recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=3, truncated="fail"))
    [s] = rollout.run([profile("ann")])
    if s.status == "failed":  # the random model may still sample the end-of-turn id within 3 tokens
        assert "endless reply" in s.error and load_dialogue(store, s.dialogue_id)["error"] == s.error
    budget = DialogueRollout(policy, Factory({"ann": 20}), config=RolloutConfig(max_new_tokens=16, max_tokens=120,
                                                                               max_turns=20))
    [s] = budget.run([profile("ann")])
    assert s.outcome == "max_tokens" and s.status == "finished"
    assert len(s.input_ids) <= 120


def test_simulator_failure_mid_dialogue_leaves_others_unaffected(policy, store):
    factory = Factory({"ann": 3, "bob": 3}, fail={"bob": 2})
    samples = DialogueRollout(policy, factory, recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=4)).run(
        [profile("ann"), profile("bob")])
    ann, bob = samples
    assert ann.status == "finished" and ann.n_turns == 3
    assert bob.status == "failed" and bob.outcome == "error" and bob.n_turns == 2
    assert "simulator failed" in bob.error and "ConnectionError" in bob.error
    stored = load_dialogue(store, bob.dialogue_id)
    assert stored["status"] == "failed" and "simulator service went away" in stored["error"]


@pytest.mark.parametrize("schedule", ["rounds", "async"])
def test_events_stream_and_stop_cancels_cleanly(policy, store, schedule):
    events = []
    rollout = DialogueRollout(policy, Factory({"ann": 10, "bob": 10}), recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=4, max_turns=10, schedule=schedule))

    def on_event(ev):
        events.append(ev)
        if ev.kind == "turn" and ev.turn["role"] == "assistant" and ev.turn["index"] == 3:
            rollout.cancel()
            rollout.cancel()  # Stop pressed twice

    rollout.on_event = on_event
    samples = rollout.run([profile("ann"), profile("bob")])
    assert all(s.status == "cancelled" and s.outcome == "cancelled" for s in samples)
    # rounds: both replies of the round are kept; async: a reply sampled in a later batch than the one that
    # triggered Stop is cut and not kept
    assert [s.n_turns for s in samples] == [2, 2] if schedule == "rounds" else \
        max(s.n_turns for s in samples) == 2 and min(s.n_turns for s in samples) >= 1
    for s in samples:
        assert load_dialogue(store, s.dialogue_id)["status"] == "cancelled"
    kinds = [e.kind for e in events]
    assert kinds[:2] == ["started", "started"] and kinds[-1] == "finished"
    for s in samples:  # each dialogue's last event is its end (async: one may end before the other's last turn)
        assert [e.kind for e in events if e.key == s.key][-1] == "finished"
    if schedule == "rounds":
        assert kinds[-2:] == ["finished", "finished"]
    turns = [e for e in events if e.kind == "turn" and e.key == samples[0].key]
    assert [t.turn["index"] for t in turns] == list(range(len(turns)))
    assert turns[0].turn["role"] == "user" and turns[0].turn["emotion"] == 30.0


def test_bad_config_and_profiles_are_named(policy):
    with pytest.raises(ValueError, match="mode"):
        RolloutConfig(mode="chatty").validate()
    with pytest.raises(ValueError, match="max_turns"):
        RolloutConfig(max_turns=0).validate()
    with pytest.raises(ValueError, match="schedule must be one of async, rounds, got 'eager'"):
        RolloutConfig(schedule="eager").validate()
    with pytest.raises(ValueError, match="max_batch must be a positive integer"):
        RolloutConfig(max_batch=0).validate()
    with pytest.raises(ValueError, match="gather_ms must be a number >= 0"):
        RolloutConfig(gather_ms=-1).validate()
    rollout = DialogueRollout(policy, Factory({}))
    with pytest.raises(ValueError, match="no profiles"):
        rollout.run([])
    with pytest.raises(ValueError, match="group_size"):
        rollout.run([profile("ann")], group_size=0)
    bad = profile("ann")
    bad.need_category = "nope"
    with pytest.raises(ValueError, match="need_category"):
        rollout.run([bad])


@pytest.mark.model
def test_real_offline_simulator(policy, store):
    from simulator.user.spec import SimulatorSpec

    factory = SimulatorSpec("offline", rules="training").factory()
    prof = profile("ann", first_line="My manager took credit for my project and I can't stop thinking about it.")
    samples = DialogueRollout(policy, factory, recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=8, max_turns=3)
                            ).run([prof], group_size=2)
    for s in samples:
        assert s.status == "finished" and s.outcome in ("success", "failure", "goodbye", "max_turns"), s.error
        assert s.emotions[0] == 30.0 and len(s.emotions) == s.n_turns + 1
        assert s.emotions[-1] < 30.0  # gibberish from a random model lowers the emotion
        stored = load_dialogue(store, s.dialogue_id)
        assert stored["simulator_fingerprint"]["rules"]["name"] == "rlver-hard"  # "training" is its old name
        assert stored["status"] == s.status


@pytest.mark.model  # offline:v2 may load its packaged models, depending on what the policy replied
def test_only_the_reply_at_the_rules_cap_goes_unjudged(policy):
    """Standard rules leave the reply that reaches their own cap (10) unjudged, as SAGE's loop does; a
    rollout capped shorter (a 3-turn evaluation) has all of its replies judged."""
    from simulator.user.rules import STANDARD
    from simulator.user.spec import SimulatorSpec

    prof = profile("ann", first_line="My manager took credit for my project and I can't stop thinking about it.")
    for cap, rules, judged in ((3, STANDARD, 3), (2, replace(STANDARD, max_turns=2), 1)):
        factory = SimulatorSpec("offline:v2", rules=rules).factory()
        (s,) = DialogueRollout(policy, factory, config=RolloutConfig(max_new_tokens=6, max_turns=cap)).run([prof], 1)
        assert s.status == "finished" and s.n_turns == cap, s.error
        assert len(s.emotions) == judged + 1, (cap, s.emotions)


def test_stream_yields_turns_as_they_happen_and_closing_cancels(policy, store):
    rollout = DialogueRollout(policy, Factory({"ann": 2, "bob": 2}), recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=4))
    events = list(rollout.stream([profile("ann"), profile("bob")]))
    assert [e.kind for e in events].count("finished") == 2 and events[-1].kind == "finished"
    assert sum(1 for e in events if e.kind == "turn" and e.turn["role"] == "assistant") == 4
    assert all(e.sample.status == "finished" for e in events if e.kind == "finished")
    stopper = DialogueRollout(policy, Factory({"ann": 50}), recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=4, max_turns=50))
    gen = stopper.stream([profile("ann")])
    first = next(gen)
    gen.close()  # the consumer went away: the run is cancelled and the dialogue stored as such
    assert stopper.cancelled
    assert load_dialogue(store, first.dialogue_id)["status"] == "cancelled"


def test_api_policy_and_api_simulator_over_http(store):
    """--policy openai:MODEL with --simulator openai:MODEL, both served by the scripted local server."""
    from simulator.user.spec import SimulatorSpec
    from testkit.scripted_server import start_server
    from trainer.policies import make_policy_engine

    server = start_server(latency_s=0.01)
    try:
        pol = make_policy_engine("openai:scripted", base_url=server.base_url, api_key="unused")
        factory = SimulatorSpec("openai:scripted", rules="standard", base_url=server.base_url, api_key="unused",
                                traffic=TrafficLimits(max_retries=0)).factory()
        samples = DialogueRollout(pol, factory, recorder=DialogueRecorder(store),
                                config=RolloutConfig(mode="think", max_turns=3)).run(
            [profile("ann", first_line="My manager took credit for my work.")], group_size=2)
    finally:
        server.stop()
    for s in samples:
        assert s.status == "finished" and 1 <= s.n_turns <= 3, s.error
        assert s.input_ids == [] and s.action_mask == []  # an API policy has no token ids to train on
        replies = [m["content"] for m in s.messages if m["role"] == "assistant"]
        assert all(r and "<think>" not in r for r in replies) and all(s.thoughts)
        stored = load_dialogue(store, s.dialogue_id)
        assert stored["policy_ref"].startswith("openai:scripted@127.0.0.1")
        assert [t["think_text"] for t in stored["turns"] if t["role"] == "assistant"] == s.thoughts


@pytest.mark.model
@pytest.mark.slow
def test_smollm2_rollout_is_one_exact_sequence_per_dialogue():
    """With a real chat tokenizer the context of turn t+1 extends turn t's context plus its sampled ids."""
    pol = HFEngine("default")
    samples = DialogueRollout(pol, Factory({"ann": 3}), config=RolloutConfig(max_new_tokens=24, seed=3)).run(
        [profile("ann")], group_size=2)
    for s in samples:
        assert s.n_turns == 3 and len(s.segments) == 1
        [(ids, mask, old)] = s.rows()
        pos = [i for i, m in enumerate(mask) if m]
        new = recompute(pol, ids)
        assert torch.allclose(new[[p - 1 for p in pos]], torch.tensor([old[p] for p in pos]), atol=2e-3)
        text = pol.tokenizer.decode(ids)
        assert text.count("<|im_start|>assistant\n") == 3 and text.count("<|im_start|>user\n") == 3


def test_stop_during_generation_ends_the_batch_early(tiny_model_dir, store):
    class StopMidway(HFEngine):
        def generate_ids(self, prompt_ids, params, seeds=None):
            self.stop_event.set()  # Stop pressed while the batch is being generated
            out = super().generate_ids(prompt_ids, params, seeds)
            self.lengths = [len(g.token_ids) for g in out]
            return out

    pol = StopMidway(tiny_model_dir)
    rollout = DialogueRollout(pol, Factory({"ann": 5}), recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=200))
    [s] = rollout.run([profile("ann")])
    assert max(pol.lengths) == 1  # generation stopped after one step instead of 200
    assert s.status == "cancelled" and s.n_turns == 0
    stored = load_dialogue(store, s.dialogue_id)
    assert stored["status"] == "cancelled" and [t["role"] for t in stored["turns"]] == ["user"]


class OpeningAgent(ScriptedAgent):
    """Generates its opening from its own seed (no scripted first line), counting the calls."""

    calls = 0

    async def opening(self) -> UserTurn:
        OpeningAgent.calls += 1
        await asyncio.sleep(self.delay)
        return UserTurn(text=f"Something happened (seed {self.seed}).", emotion=self.emotion,
                        inner={"planning": f"opening of seed {self.seed}"})


@pytest.mark.parametrize("shared", [True, False])
def test_shared_opening_gives_a_group_one_generated_first_message(policy, store, shared):
    OpeningAgent.calls = 0
    rollout = DialogueRollout(policy, lambda prof, seed: OpeningAgent(prof, seed, ends_after=1),
                            recorder=DialogueRecorder(store),
                            config=RolloutConfig(max_new_tokens=4, shared_opening=shared))
    samples = rollout.run([profile("ann"), profile("bob")], group_size=3)
    assert all(s.status == "finished" for s in samples)
    firsts = {}
    for s in samples:
        firsts.setdefault(s.group_id, []).append(s.messages[0]["content"])
        stored = load_dialogue(store, s.dialogue_id)["turns"][0]
        assert (stored["text"], stored["emotion"]) == (s.messages[0]["content"], 30.0)
    assert len(firsts) == 2
    if shared:  # one opening per group, the same first message for every member; groups differ
        assert OpeningAgent.calls == 2
        assert all(len(set(texts)) == 1 for texts in firsts.values())
        assert len({texts[0] for texts in firsts.values()}) == 2
    else:  # every member opened on its own (its own seed)
        assert OpeningAgent.calls == 6
        assert all(len(set(texts)) == 3 for texts in firsts.values())


def test_a_failed_shared_opening_fails_the_whole_group(policy):
    class Broken(ScriptedAgent):
        async def opening(self) -> UserTurn:
            raise ConnectionError("simulator service went away")

    samples = DialogueRollout(policy, lambda prof, seed: Broken(prof, seed),
                            config=RolloutConfig(max_new_tokens=4, shared_opening=True)).run([profile("ann")], 2)
    assert [s.status for s in samples] == ["failed", "failed"]
    assert "simulator failed on the opening" in samples[0].error
    assert samples[1].error.startswith("the group's shared opening failed: simulator failed on the opening")


def test_a_sentient_agent_continues_from_the_shared_opening():
    """The offline user tells its story piece by piece: a member that adopts the leader's opening does not
    tell the opening's piece again, and keeps its own seed."""
    from conftest import make_sim_profile

    from simulator.user.agent import SentientAgent
    from simulator.user.backends import make_backend
    from simulator.user.rules import get_rules

    prof, backend = make_sim_profile(first_line=""), make_backend("offline")
    leader, member = (SentientAgent(prof, backend, get_rules("rlver-hard"), seed=s) for s in (1, 2))
    opening = asyncio.run(leader.opening())
    assert prof.extra["events"][0] in opening.text
    member.adopt_opening(leader)
    assert member.state["used_events"] == leader.state["used_events"] == [0]
    assert member.state["seed"] == 2 and member.state["used_events"] is not leader.state["used_events"]
    reply = asyncio.run(member.respond([{"role": "user", "content": opening.text}], "Tell me more."))
    assert prof.extra["events"][0] not in reply.text
