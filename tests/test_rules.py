"""Emotion rules: clamping, range, tiers, ends, presets."""
import pytest

from simulator.user.rules import RULE_SETS, EmotionRules, get_rules, says_goodbye, tier


def test_benchmark_defaults():
    r = EmotionRules()
    assert (r.start, r.lo, r.hi, r.max_delta, r.success_at, r.failure_below, r.max_turns) == (40, 0, 100, 10, 100, 10, 10)
    assert r.end_on_goodbye and RULE_SETS["standard"] == EmotionRules(name="standard")


@pytest.mark.parametrize("emotion,expected", [(100, "S"), (99.9, "A"), (70, "A"), (69, "B"), (40, "B"),
                                              (39.5, "C"), (10, "C"), (9.99, "F"), (0, "F")])
def test_tiers(emotion, expected):
    assert tier(emotion) == expected


def test_change_is_clamped_and_kept_in_range():
    r = EmotionRules()
    assert r.apply(40, 25) == (50, 10)
    assert r.apply(40, -25) == (30, -10)
    assert r.apply(95, 10) == (100, 5)
    assert r.apply(4, -10) == (-6, -10)  # SAGE caps at 100 but has no floor
    assert EmotionRules(floor_at_lo=True).apply(4, -10) == (0, -4)
    assert r.apply(40, 3) == (43, 3)


def test_the_reply_that_reaches_the_cap_is_not_judged_by_the_benchmark():
    std = get_rules("standard")
    assert [std.judges(n) for n in (1, 9, 10)] == [True, True, False]  # 10 replies, 9 emotion steps
    hard = get_rules("rlver-hard")
    assert hard.max_turns == 9 and hard.judges(9)  # RLVER's training: 9 replies, every one judged


@pytest.mark.parametrize("text,ends", [("好的，再见！", True), ("拜拜啦", True), ("Okay. Bye.", True),
                                       ("Goodbye then", True), ("bye-bye!", True), ("I need to go", False),
                                       ("maybe bypass it", False), ("see you around, byebye", False),
                                       ("再见面的时候", True)])
def test_end_words(text, ends):
    # substring, as SAGE checks (so 再见面 counts too); English: the whole word bye / goodbye
    assert says_goodbye(text) is ends


def test_ends():
    r = EmotionRules()
    assert r.end_outcome(100, 1) == "success"
    assert r.end_outcome(9, 1) == "failure"
    assert r.end_outcome(10, 1) == ""
    assert r.end_outcome(50, 9) == ""
    assert r.end_outcome(50, 10) == "max_turns"
    assert r.end_outcome(100, 10) == "success"  # reaching 100 on the last turn is still a success


def test_rlver_hard_preset_is_unclamped_fails_at_zero_and_never_ends_at_100():
    r = get_rules("rlver-hard")
    assert get_rules("training") == r  # the name older configs used
    assert (r.start, r.max_turns) == (30, 9)
    assert r.apply(30, 45) == (75, 45)
    assert r.end_outcome(5, 1) == ""
    assert r.end_outcome(0, 1) == "failure"
    assert r.end_outcome(100, 1) == ""
    assert r.end_outcome(50, 9) == "max_turns"


def test_rlver_moderate_keeps_the_benchmark_emotion_settings():
    m, std = get_rules("rlver-moderate"), get_rules("standard")
    assert (m.start, m.max_delta) == (std.start, std.max_delta)
    assert m.end_outcome(100, 1) == "" and m.judges(9)


def test_challenging_preset_is_harsher():
    std, ch = get_rules("standard"), get_rules("challenging")
    assert ch.start < std.start and ch.strict_need
    assert ch.apply(50, -10)[1] < std.apply(50, -10)[1]  # larger negative swings
    assert ch.apply(50, -20) == (35, -15)
    assert ch.apply(50, 20) == std.apply(50, 20)  # rises capped as in the benchmark


def test_bad_settings_and_unknown_preset():
    with pytest.raises(ValueError, match="start"):
        EmotionRules(start=120)
    with pytest.raises(ValueError, match="max_turns"):
        EmotionRules(max_turns=0)
    with pytest.raises(ValueError, match="unknown emotion rules 'easy'"):
        get_rules("easy")


def test_round_trip():
    r = get_rules("challenging")
    assert EmotionRules.from_dict(r.to_dict()) == r
