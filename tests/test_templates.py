"""Think-then-say parsing and the system prompts."""
from __future__ import annotations

import pytest

from trainer.rollout.templates import SYSTEM_PROMPTS, split_think, system_prompt, visible_reply


@pytest.mark.parametrize("text, expected", [
    ("<think>she is hurt</think>That sounds painful.", ("she is hurt", "That sounds painful.", True)),
    ("  <think>\nplan\n</think>\n\nHi there.  ", ("plan", "Hi there.", True)),
    ("No thoughts, just a reply.", ("", "No thoughts, just a reply.", False)),
    ("<think>never closed, the model rambled", ("never closed, the model rambled", "", False)),
    ("<think>thinking</think>", ("thinking", "", False)),  # closed but no reply
    ("Hello <think>late</think> there", ("Hello late", "there", False)),  # block not at the start
    ("<think>a</think>b<think>c</think>d", ("abc", "d", False)),  # two blocks
    ("reply</think>", ("reply", "", False)),  # stray close tag
])
def test_split_think(text, expected):
    assert split_think(text) == expected


def test_visible_reply_settings():
    assert visible_reply("<think>x</think>Hi.", "think") == ("x", "Hi.", True)
    assert visible_reply("plain text", "think", "penalize") == ("", "plain text", False)
    assert visible_reply("plain <think>text", "think", "as_reply") == ("", "plain text", True)
    assert visible_reply("plain text", "think", "fail")[2] is False
    assert visible_reply(" <think>x</think>Hi. ", "direct") == ("", " xHi. ", True)  # as said, tags removed
    with pytest.raises(ValueError, match="bad_think"):
        visible_reply("x", "think", "ignore")


def test_system_prompts_cover_modes_and_languages():
    assert set(SYSTEM_PROMPTS) == {(m, l) for m in ("think", "direct") for l in ("en", "zh")}
    assert "<think>" in system_prompt("think", "en") and "<think>" in system_prompt("think", "zh")
    assert "<think>" not in system_prompt("direct", "en") and "<think>" not in system_prompt("direct", "zh")
    assert system_prompt("direct", "fr") == system_prompt("direct", "en")
    with pytest.raises(ValueError, match="mode"):
        system_prompt("shout")
