"""The async schedule: dialogues whose simulated users answer at different speeds finish their turns out of
order, each policy turn batched with whatever else is ready; the token bookkeeping stays exact and, with
per-turn seeds, the samples equal those of the rounds schedule."""
from __future__ import annotations

import pytest
import torch
from scripted_rollout import RecordingEngine, ScriptedAgent, profile, recompute

from simulator.personas.profile import Profile
from trainer.rollout.dialogue_rollout import DialogueRollout, RolloutConfig


class SlowAndFastFactory:
    """Scripted users answering after a delay of their own: `users[id] = (replies until goodbye, delay s)`."""

    def __init__(self, users: dict[str, tuple[int, float]]):
        self.users, self.agents = users, {}

    def __call__(self, prof: Profile, seed: int) -> ScriptedAgent:
        ends_after, delay = self.users[prof.id]
        agent = ScriptedAgent(prof, seed, ends_after=ends_after, delay=delay)
        self.agents[(prof.id, seed)] = agent
        return agent


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    return RecordingEngine(tiny_model_dir)


def assert_exact_tokens(policy: RecordingEngine, s) -> None:
    """Every sampled id sits after exactly the context it was sampled with: the recorded log-probs equal a
    recomputation on the sample's own ids, and the masked spans decode to the replies the user saw."""
    assert len(s.input_ids) == len(s.action_mask) == len(s.old_logprobs) and len(s.segments) == 1
    [(ids, mask, old)] = s.rows()
    pos = [i for i, m in enumerate(mask) if m]
    new = recompute(policy, ids)
    assert torch.allclose(new[[p - 1 for p in pos]], torch.tensor([old[p] for p in pos]), atol=1e-4)
    replies = [m["content"] for m in s.messages if m["role"] == "assistant"]
    assert [policy.decode(s.input_ids[a:b]).strip() for a, b in s.turn_spans] == [r.strip() for r in replies]


def test_out_of_order_turns_keep_exact_token_bookkeeping(policy):
    policy.batches.clear()
    factory = SlowAndFastFactory({"ann": (4, 0.0), "bob": (2, 2.0), "cat": (3, 0.1)})
    events = []
    rollout = DialogueRollout(policy, factory, on_event=events.append,
                            config=RolloutConfig(max_new_tokens=6, seed=4, gather_ms=2))
    samples = rollout.run([profile("ann"), profile("bob"), profile("cat")])
    assert [(s.profile_id, s.n_turns, s.status) for s in samples] == \
        [("ann", 4, "finished"), ("bob", 2, "finished"), ("cat", 3, "finished")]
    # the fast user's dialogue ran all its turns while the slow one was still waiting for its first answer
    order = [(e.profile_id, e.turn["index"]) for e in events if e.kind == "turn" and e.turn["role"] == "assistant"]
    assert order.index(("ann", 7)) < order.index(("bob", 3))
    assert [e.profile_id for e in events if e.kind == "finished"][-1] == "bob"
    assert sum(policy.batches) == 9 and min(policy.batches) < 3  # turns went out as they became ready
    agents = {pid: agent for (pid, _seed), agent in factory.agents.items()}
    for s in samples:
        agent = agents[s.profile_id]
        assert agent.received == [m["content"] for m in s.messages if m["role"] == "assistant"]
        assert s.emotions == [30.0 + 5 * i for i in range(s.n_turns + 1)]
        assert_exact_tokens(policy, s)


def test_async_and_rounds_sample_the_same_dialogues(policy):
    """With per-turn seeds the reply to a prompt does not depend on its batch mates, so the async schedule
    (batches of at most 2, users of different speeds) gives the samples of the rounds schedule."""
    users = {"ann": (3, 0.0), "bob": (2, 0.2), "cat": (3, 0.05), "dan": (1, 0.1)}
    runs = {}
    for schedule in ("rounds", "async"):
        policy.batches.clear()
        config = RolloutConfig(max_new_tokens=6, seed=9, schedule=schedule, max_batch=2, temperature=1.0)
        runs[schedule] = DialogueRollout(policy, SlowAndFastFactory(users), config=config).run(
            [profile(pid) for pid in users], group_size=1)
        if schedule == "rounds":
            assert policy.batches == [4, 3, 2]  # every active dialogue in one batch, whatever max_batch
        else:
            assert max(policy.batches) <= 2 and sum(policy.batches) == 9
    for r, a in zip(runs["rounds"], runs["async"]):
        assert (a.profile_id, a.n_turns, a.status, a.outcome) == (r.profile_id, r.n_turns, r.status, r.outcome)
        assert a.input_ids == r.input_ids and a.action_mask == r.action_mask and a.turn_spans == r.turn_spans
        assert a.old_logprobs == pytest.approx(r.old_logprobs, abs=1e-4)
        assert a.messages == r.messages and a.emotions == r.emotions
        assert_exact_tokens(policy, a)


@pytest.mark.parametrize("schedule", ["async", "rounds"])
def test_a_failing_policy_batch_fails_its_dialogues_with_the_reason(tiny_model_dir, schedule):
    class Broken(RecordingEngine):
        def generate_ids(self, prompt_ids, params, seeds=None):
            raise RuntimeError("out of memory")

    samples = DialogueRollout(Broken(tiny_model_dir), SlowAndFastFactory({"ann": (3, 0.0), "bob": (3, 0.05)}),
                            config=RolloutConfig(max_new_tokens=4, schedule=schedule)).run(
        [profile("ann"), profile("bob")])
    assert [(s.status, s.n_turns) for s in samples] == [("failed", 0), ("failed", 0)]
    assert all(s.error == "policy generation failed: RuntimeError: out of memory" for s in samples)
