"""Turn-level advantages (`advantage: turn_grpo | turn_gae`): the numbers on hand-made groups, where each
reply's tokens get their turn's value, that dialogue length alone earns no push, and two training steps of
each estimator on the tiny model."""
from __future__ import annotations

import itertools
import json
import math

import pytest
import torch

from trainer.config import ConfigError, TrainConfig
from trainer.learning import algorithms, turn_advantages
from trainer.learning.batch import make_batch, spread_turn_values, turn_table, values_at_turn_starts

NAN = math.nan


def close(actual: torch.Tensor, expected: list, atol: float = 1e-4) -> None:
    torch.testing.assert_close(actual.float(), torch.tensor(expected, dtype=torch.float32), atol=atol, rtol=0)


def test_turn_grpo_on_a_hand_made_group():
    # group "a": three dialogues of the same persona and user seed; group "b": one dialogue (no baseline)
    changes = torch.tensor([[0.10, -0.05], [0.00, 0.05], [0.20, NAN], [0.30, 0.10]])  # the 3rd's 2nd reply unjudged
    scores = torch.tensor([0.45, 0.45, 0.60, 0.70])
    groups = ["a", "a", "a", "b"]
    # final: mean 0.50, std sqrt((0.05^2 + 0.05^2 + 0.10^2) / 2) = 0.0866 -> -0.5774, -0.5774, +1.1547
    # turn 0: 0.10, 0.00, 0.20: mean 0.10, std 0.10 -> 0, -1, +1
    # turn 1: -0.05, +0.05 (the unjudged reply left out): mean 0, std 0.0707 -> -0.7071, +0.7071, and 0
    turn = turn_advantages.turn_group_advantages(changes, groups)
    close(turn, [[0.0, -0.70711], [-1.0, 0.70711], [1.0, 0.0], [0.0, 0.0]])
    adv = turn_advantages.turn_grpo_advantages(scores, changes, groups, turn_weight=0.5)
    close(adv, [[-0.57735, -0.57735 - 0.35355],
                [-0.57735 - 0.5, -0.57735 + 0.35355],
                [1.15470 + 0.5, 0.0],  # the unjudged reply cannot have changed the reward: no credit at all
                [0.0, 0.0]])
    # turn_weight 0 is the dialogue's GRPO advantage on every credited reply
    plain = algorithms.grpo_advantages(scores, groups)
    expected = plain[:, None].expand(4, 2).clone()
    expected[2, 1] = 0.0
    close(turn_advantages.turn_grpo_advantages(scores, changes, groups, 0.0), expected.tolist())


def test_turn_gae_on_hand_made_dialogues():
    rewards = torch.tensor([[0.0, 0.0, 0.6], [0.10, -0.05, 0.0]])  # the final emotion; per-turn changes
    values = torch.tensor([[0.4, 0.5, 0.55], [0.2, 0.1, 0.0]])
    said = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # the second dialogue has two replies
    adv, returns = turn_advantages.turn_gae_advantages(rewards, values, said, turn_gamma=0.9, lam=0.95)
    # first: delta_2 = 0.6 - 0.55 = 0.05; delta_1 = 0.9 * 0.55 - 0.5 = -0.005, A_1 = -0.005 + 0.855 * 0.05 = 0.03775;
    # delta_0 = 0.9 * 0.5 - 0.4 = 0.05, A_0 = 0.05 + 0.855 * 0.03775 = 0.08227625
    # second: A_1 = -0.05 - 0.1 = -0.15; delta_0 = 0.1 + 0.9 * 0.1 - 0.2 = -0.01, A_0 = -0.01 + 0.855 * -0.15
    close(adv, [[0.08227625, 0.03775, 0.05], [-0.13825, -0.15, 0.0]], atol=1e-6)
    close(returns, [[0.48227625, 0.53775, 0.6], [0.06175, -0.05, 0.0]], atol=1e-6)
    # gamma = lambda = 1: A_k = sum_{j >= k} r_j - V_k
    adv1, _ = turn_advantages.turn_gae_advantages(rewards, values, said)
    assert adv1[0].tolist() == pytest.approx([0.2, 0.1, 0.05])


def test_a_turns_term_is_as_large_as_the_difference_it_measures():
    # turn 0: the two dialogues' changes 20 points apart; turn 3: 0.1 point apart
    changes = torch.tensor([[0.10, 0.0, 0.0, 0.051], [-0.10, 0.0, 0.0, 0.050]])
    turn = turn_advantages.turn_group_advantages(changes, ["g", "g"])
    close(turn[:, 0], [0.70711, -0.70711])  # a real difference: the per-turn std normalisation as GRPO's
    assert 0 < float(turn[0, 3]) < 0.011 and float(turn[1, 3]) == -float(turn[0, 3])  # 0.0005 / 0.05 = 0.01
    # below the floor the term is proportional to the difference
    wider = turn_advantages.turn_group_advantages(torch.tensor([[0.06], [0.05]]), ["g", "g"])
    assert float(wider[0, 0]) == pytest.approx(10 * float(turn[0, 3]), rel=1e-3)
    # the floor is per turn: a turn's term does not depend on the turns after it (which only some dialogues reach)
    longer = torch.cat([changes, torch.tensor([[0.3], [NAN]])], dim=1)
    torch.testing.assert_close(turn_advantages.turn_group_advantages(longer, ["g", "g"])[:, :4], turn)


def test_equal_changes_give_exact_zeros():
    changes = torch.full((7, 2), 0.05)  # float32: a sum of seven 0.05 is not seven times 0.05
    changes[:, 1] = torch.tensor([0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07])
    scores = torch.tensor([0.55, 0.5, 0.6, 0.55, 0.5, 0.6, 0.55])
    turn = turn_advantages.turn_group_advantages(changes, ["g"] * 7)
    assert turn[:, 0].tolist() == [0.0] * 7  # exactly: no eps-sized remainder of float32 rounding
    assert turn[:, 1].abs().max() > 0.5  # different changes still get their terms
    assert turn_advantages.turn_grpo_advantages(scores, changes, ["g"] * 7)[:, 0].tolist() == \
        algorithms.grpo_advantages(scores, ["g"] * 7).tolist()  # the dialogue's term alone


def _capped(emotions: list[float], group: str) -> dict:
    """Two replies; with two emotions the user judged only the first (the rules' cap stopped before the second)."""
    return _dialogue(emotions, group)


@pytest.mark.model
@pytest.mark.parametrize("algorithm,advantage", [("grpo", "turn_grpo"), ("ppo", "turn_gae")])
def test_a_reply_that_cannot_change_the_reward_gets_no_credit(tiny_model_dir, algorithm, advantage):
    from trainer.learning.learner import Learner

    batch = make_batch([_capped([30, 45], "g"), _capped([30, 35, 40], "g")], pad_token_id=0, rewards=[0.45, 0.40])
    table = turn_table(batch)
    assert table.said.tolist() == [[1, 1], [1, 1]] and table.credited.tolist() == [[1, 0], [1, 1]]
    close(table.rewards, [[0.45, 0.0], [0.0, 0.40]], atol=1e-6)  # the reward on the last reply that could set it
    learner = Learner(TrainConfig(model=str(tiny_model_dir), algorithm=algorithm, advantage=advantage, group_size=2,
                                  whiten_advantages=False), tiny_model_dir)
    values = torch.full(batch.action_mask.shape, 0.2)
    adv, returns = learner.advantages(batch, values if algorithm == "ppo" else None)
    unjudged = batch.turn_index[0] == 1
    assert adv[0][unjudged].abs().sum() == 0.0
    assert adv[0][batch.turn_index[0] == 0].abs().min() > 0.1  # the judged reply keeps its credit
    if returns is not None:  # turn_gae: the first reply's return is the dialogue's reward (gamma = lambda = 1)
        assert returns[0][batch.turn_index[0] == 0].tolist() == pytest.approx([0.45] * 3)


def _dialogue(emotions: list[float], group: str) -> dict:
    # prompt 0-1, reply 0 = tokens 2-4, user 5-6, reply 1 = tokens 7-9, user 10-11
    ids = list(range(20, 32))
    mask = [0, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0, 0]
    return {"input_ids": ids, "action_mask": mask, "group_id": group, "turn_spans": [(2, 5), (7, 10)],
            "emotions": emotions}


def test_each_reply_shares_its_turns_advantage_and_user_tokens_get_none():
    batch = make_batch([_dialogue([30, 40, 35], "g"), _dialogue([30, 30, 40], "g")], pad_token_id=0,
                       rewards=[0.35, 0.40])
    # column t describes token t + 1: reply 0 is columns 1-3, reply 1 columns 6-8
    assert batch.turn_index[0].tolist() == [-1, 0, 0, 0, -1, -1, 1, 1, 1, -1, -1]
    assert batch.turn_changes == [pytest.approx([0.10, -0.05]), pytest.approx([0.0, 0.10])]
    table = turn_table(batch)
    assert table.said.tolist() == [[1, 1], [1, 1]]
    close(table.rewards, [[0, 0.35], [0, 0.40]], atol=1e-6)
    per_turn = turn_advantages.turn_grpo_advantages(table.scores, table.changes, table.groups)
    adv = spread_turn_values(per_turn, table.dialogue, batch.turn_index)
    for r in range(2):
        assert adv[r, 1:4].tolist() == pytest.approx([per_turn[r, 0].item()] * 3)
        assert adv[r, 6:9].tolist() == pytest.approx([per_turn[r, 1].item()] * 3)
        assert adv[r][batch.action_mask[r] == 0].abs().sum().item() == 0.0  # prompt and user tokens: none
    # the critic is read where each reply starts: the output at the last token before it (columns 1 and 6)
    values = torch.arange(22, dtype=torch.float32).reshape(2, 11)
    assert values_at_turn_starts(values, table.dialogue, batch.turn_index, (2, 2)).tolist() == \
        [[1.0, 6.0], [12.0, 17.0]]


def test_think_mode_rows_keep_each_replys_turn_and_the_critic_read_before_it():
    from trainer.rollout.types import RolloutSample

    # think mode: one causal row per policy turn; reply 0 = tokens 2-4 in row [0, 5), reply 1 = tokens 8-9 in
    # row [5, 10) (that row repeats the visible history, tokens 5-7, without the earlier thought)
    sample = RolloutSample(key="k", dialogue_id=None, profile_id="p", group_id="g", input_ids=list(range(40, 50)),
                           action_mask=[0, 0, 1, 1, 1, 0, 0, 0, 1, 1], turn_spans=[(2, 5), (8, 10)],
                           segments=[(0, 5), (5, 10)], emotions=[30.0, 45.0, 40.0])
    batch = make_batch([sample], pad_token_id=0, rewards=[0.40])
    assert batch.turn_index.tolist() == [[-1, 0, 0, 0], [-1, -1, 1, 1]]
    table = turn_table(batch)
    assert table.dialogue.tolist() == [0, 0] and table.said.tolist() == [[1.0, 1.0]]
    close(table.changes, [[0.15, -0.05]], atol=1e-6)
    close(table.rewards, [[0.0, 0.40]], atol=1e-6)  # the paper's reward on the last reply
    values = torch.tensor([[0.0, 0.3, 9.0, 9.0], [0.0, 5.0, 0.2, 9.0]])
    turn_values = values_at_turn_starts(values, table.dialogue, batch.turn_index, (1, 2))
    close(turn_values, [[0.3, 0.2]], atol=1e-6)
    adv, _ = turn_advantages.turn_gae_advantages(table.rewards, turn_values, table.said)
    close(spread_turn_values(adv, table.dialogue, batch.turn_index), [[0.0, 0.1, 0.1, 0.1], [0.0, 0.0, 0.2, 0.2]])


# ---------------------------------------------------------------------------------------------- length bias
# A group of four dialogues (same persona, same user seed). Reply 1 decides the length: the user leaves after
# it (2 replies) or talks for 2 more (4 replies), each with probability 1/2, whatever else happens. The push
# an estimator gives towards longer dialogues is E[sum_i A_i1 * s_i], s_i = +1 long, -1 short (the score of
# the length decision, up to its factor 1/2), taken exactly over all 16 assignments of lengths.
START = 0.30
SHARED = [[0.05, 0.10], [0.00, 0.05], [0.10, -0.05], [-0.05, 0.10]]  # the emotion changes of replies 0 and 1
NET_ZERO = [[0.10, -0.10], [0.05, -0.05], [-0.10, 0.10], [0.0, 0.0]]  # replies 2, 3: the user ends where she was
WARMING = [[0.05, 0.10], [0.10, 0.05], [0.05, 0.05], [0.10, 0.10]]  # replies 2, 3: the user warms further


def _groups(extra: list[list[float]]):
    for long in itertools.product([False, True], repeat=4):
        changes = torch.full((4, 4), NAN)
        for i, is_long in enumerate(long):
            d = SHARED[i] + (extra[i] if is_long else [])
            changes[i, :len(d)] = torch.tensor(d)
        said = (~torch.isnan(changes)).float()
        finals = START + torch.nan_to_num(changes).sum(dim=1)
        yield torch.tensor([1.0 if x else -1.0 for x in long]), changes, said, finals


def _push(extra: list[list[float]], advantage) -> float:
    pushes = [float((advantage(changes, said, finals)[:, 1] * s).sum()) for s, changes, said, finals in _groups(extra)]
    return sum(pushes) / len(pushes)


def _turn_grpo(changes, said, finals):
    return turn_advantages.turn_grpo_advantages(finals, changes, ["g"] * 4)


def _dialogue_grpo(changes, said, finals):
    return algorithms.grpo_advantages(finals, ["g"] * 4)[:, None].expand(4, 4)


def _turn_gae(turn_gamma: float = 1.0, per_turn: bool = False):
    def advantage(changes, said, finals):
        # V_k: the emotion before reply k (a critic that knows the state, not the length to come)
        values = (START + torch.cumsum(torch.nan_to_num(changes), dim=1) - torch.nan_to_num(changes)) * said
        last = said.sum(dim=1).long() - 1
        rewards = torch.nan_to_num(changes) if per_turn else \
            torch.zeros(4, 4).scatter(1, last[:, None], finals[:, None])
        return turn_advantages.turn_gae_advantages(rewards, values, said, turn_gamma)[0]
    return advantage


def _rfc_construction(changes, said, finals):
    """Per-turn-index normalised changes summed over the turns from k on, no dialogue term (verl RFC #7244)."""
    turn = turn_advantages.turn_group_advantages(changes, ["g"] * 4)
    return turn.flip(1).cumsum(1).flip(1)


def test_length_alone_earns_no_push_either_way():
    # the extra replies leave the user where she was: length is the only difference, the push must be 0
    for estimator in (_turn_grpo, _dialogue_grpo, _turn_gae(), _turn_gae(per_turn=True)):
        assert _push(NET_ZERO, estimator) == pytest.approx(0.0, abs=1e-6)
    # the extra replies warm the user: the final emotion prefers long dialogues, and so do the estimators; the
    # turn term adds nothing of its own to the dialogue's GRPO push
    assert _push(WARMING, _dialogue_grpo) > 0.1
    assert _push(WARMING, _turn_grpo) == pytest.approx(_push(WARMING, _dialogue_grpo), abs=1e-6)
    assert _push(WARMING, _turn_gae()) > 0.1 and _push(WARMING, _turn_gae(per_turn=True)) > 0.1
    # what the RFC warns of: summing per-index normalised changes misses what the extra turns gained
    assert _push(WARMING, _rfc_construction) == pytest.approx(0.0, abs=1e-6)
    # turn_gamma < 1 changes the objective itself: the same final emotion reached later is worth less
    assert _push(NET_ZERO, _turn_gae(turn_gamma=0.9)) < -0.01


def test_each_turn_estimator_names_its_algorithm():
    with pytest.raises(ConfigError) as err:
        TrainConfig(algorithm="ppo", advantage="turn_grpo").validate(check_paths=False)
    assert err.value.errors == {"advantage": "turn_grpo needs algorithm grpo, got ppo"}
    errors = TrainConfig(advantage="per_token", turn_gamma=1.5, turn_weight=-1).errors(check_paths=False)
    assert errors["advantage"].startswith("unknown value 'per_token'; one of dialogue, turn_grpo, turn_gae")
    assert errors["turn_gamma"] == "must be in [0, 1], got 1.5" and errors["turn_weight"] == "must be >= 0, got -1"
    assert TrainConfig(algorithm="grpo", advantage="turn_grpo").errors(check_paths=False) == {}


@pytest.mark.model
@pytest.mark.parametrize("algorithm,advantage,reward", [("grpo", "turn_grpo", "final_emotion"),
                                                         ("ppo", "turn_gae", "emotion_deltas")])
def test_two_training_steps_with_each_turn_estimator(tiny_model_dir, tmp_path, algorithm, advantage, reward):
    from helpers import tiny_train_config, trainer_run

    config = tiny_train_config(tmp_path, tiny_model_dir, algorithm=algorithm, advantage=advantage, reward=reward,
                               group_size=2, max_turns=2, steps=2, report_to=["none"])
    r = trainer_run("train", "--config", str(config), "--db", f"sqlite:///{tmp_path / 'lab.db'}", "--json",
                    env_home=tmp_path / "home")
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["status"] == "succeeded" and result["steps"] == 2, result
    assert math.isfinite(result["metrics"]["policy_loss"]) and result["metrics"]["updates"] >= 1


def test_the_training_form_offers_the_estimators_and_names_a_mismatch():
    from app.services import training
    from app.services.plans import training_plan

    assert training.field_choices("advantage") == ("dialogue", "turn_grpo", "turn_gae")
    values, extra, _ = training_plan.preset_form("cpu-demo-turn-grpo")
    form = dict(zip(training.FORM_NAMES, values))
    config, errors = training.config_from_form(form, extra, check_paths=False)
    assert errors == {} and (config.advantage, config.max_turns) == ("turn_grpo", 3)
    config, errors = training.config_from_form({**form, "algorithm": "ppo"}, extra, check_paths=False)
    assert config is None and errors["advantage"] == "turn_grpo needs algorithm grpo, got ppo"


@pytest.mark.model
def test_the_plan_says_which_estimator_it_planned(tiny_model_dir):
    from trainer.plan import plan_config

    config = TrainConfig(model=str(tiny_model_dir), algorithm="ppo", advantage="turn_gae", device="cpu")
    notes = plan_config(config, probe=False).notes
    assert any(n.startswith("advantage turn_gae: per-turn arithmetic") for n in notes), notes
