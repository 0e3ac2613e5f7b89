"""Parsing real LLM output of the emotion and reply steps, including the SAGE transcripts' texts."""
import json
import random

import pytest

from simulator.user.parsing import ParseError, classify_fit, parse_change, parse_emotion, parse_plan, parse_reply

EN_CLEAN = """[Partner's meaning]
They say my effort mattered.
[Need fit]
fits - they praise what I actually did.
[Inner activity]
Finally someone noticed.
[Felt reaction]
Warm, a bit embarrassed.
[Emotion change]
+6"""


def test_clean_english():
    out = parse_emotion(EN_CLEAN)
    assert out["change"] == 6 and out["fit"] == "fits"
    assert out["content"] == "They say my effort mattered."
    assert out["activity"] == "Finally someone noticed."


@pytest.mark.parametrize("text,expected", [
    ("+5", 5), ("-3", -3), ("5分", 5), ("Change: [ -4 ]", -4), ("[ -4 ]", -4), ("－７", -7), ("＋3分", 3),
    ("−2", -2), ("from 40 to 35", -5), ("40 -> 48", 8), ("下降5分", -5), ("drop of 3", -3), ("0", 0),
    ("about +2.5 points", 2.5),
])
def test_change_numbers(text, expected):
    assert parse_change(text) == expected


def test_reordered_markdown_fullwidth_and_prose():
    text = ("Sure! Here is my analysis.\n\n**Emotion change**： -4\n\n### Inner activity\nThey are lecturing me.\n"
            "- **Need fit:** misses; no praise at all\n[Felt reaction]\nTired of this.\nHope that helps!")
    out = parse_emotion(text)
    assert out["change"] == -4 and out["fit"] == "misses"
    assert out["activity"] == "They are lecturing me."


def test_missing_fields_keep_the_change():
    out = parse_emotion("Need fit: partly\nChange: +2")
    assert out["change"] == 2 and out["fit"] == "partly" and out["content"] == "" and out["analyse"] == ""


def test_change_in_prose_or_last_line():
    assert parse_emotion("I felt a bit better. My emotion change is +3 overall.")["change"] == 3
    assert parse_emotion("They ignored me completely.\n-7")["change"] == -7


def test_chinese_fullwidth():
    text = "【心理活动】\n他根本没在听。\n【人物对话目的是否达到】\n偏离，完全没有分析原因。\n【情绪变化】：－６分"
    out = parse_emotion(text)
    assert out["change"] == -6 and out["fit"] == "misses" and out["activity"] == "他根本没在听。"


def test_prose_mentioning_change_is_not_a_header():
    text = "[Inner activity]\nChange is hard for me, I know.\n[Emotion change]\n-2"
    assert parse_emotion(text)["change"] == -2


@pytest.mark.parametrize("text", ["", "   ", "I don't know how I feel.", "[Inner activity]\nno idea"])
def test_unreadable_raises(text):
    with pytest.raises(ParseError):
        parse_emotion(text)


def test_classify_fit():
    assert classify_fit("部分贴合，但还不够深入") == "partly"
    assert classify_fit("是的，NPC的回复贴合了对话目的") == "fits"
    assert classify_fit("未达到。") == "misses"
    assert classify_fit("misses: generic") == "misses"


def test_reply_step():
    out = parse_reply("[Plan]\n1. Attitude: negative\n2. Goal: push back\n3. Tone: curt\n4. Content: the shifts\n"
                      "[Reply]\n\"You: Honestly? That's not it.\"\n[Leave]\nno")
    assert out["reply"] == "Honestly? That's not it." and out["leave"] is False
    assert out["plan"] == {"attitude": "negative", "goal": "push back", "tone": "curt", "content": "the shifts"}
    zh = parse_reply("【回复规划】\n1. 回复态度：正面\n【回复】\n谢谢你，我先走啦，再见。\n【是否结束】\n是")
    assert zh["reply"] == "谢谢你,我先走啦,再见。" and zh["leave"] is True and zh["plan"]["attitude"] == "正面"


def test_reply_plain_text_and_empty():
    assert parse_reply("Yeah, maybe. I still keep thinking about it.")["reply"].startswith("Yeah")
    assert parse_reply("[Opening]\nHey, got a minute?")["reply"] == "Hey, got a minute?"
    with pytest.raises(ParseError):
        parse_reply("[Plan]\n1. Attitude: calm\n[Reply]\n")
    with pytest.raises(ParseError):
        parse_reply("")


# ---------------------------------------------------------------- the SAGE transcripts
ANALYSIS = {"activity": "心理活动", "TargetCompletion": "人物对话目的是否达到", "content": "NPC想要表达的内容",
            "analyse": "人物对NPC回复的感受"}
CHANGE_STYLES = ["[情绪变化]\n{c:+d}", "【Emotion变化】：{c}", "**情绪变化**: {c:+d}分", "Change: [ {c} ]", "变化：{c:+d}"]


def _sage_user_turns(shared_data):
    for path in sorted((shared_data / "sage").glob("*_result.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            for turn in json.loads(line)["history"]:
                if turn["role"] == "user" and isinstance(turn.get("planning"), dict):
                    yield turn


def _rebuild(planning: dict, rng: random.Random) -> str:
    """An emotion-step output in SAGE's bracketed style from a transcript's analysis fields, order shuffled."""
    parts = []
    for key, label in ANALYSIS.items():
        body = planning[key].strip()
        parts.append("[" + body if body.startswith(label + "]") else f"[{label}]\n{body}")
    rng.shuffle(parts)
    text = "\n".join(parts) + "\n" + rng.choice(CHANGE_STYLES).format(c=planning["change"])
    return text.replace(":", "：") if rng.random() < 0.3 else text


def test_sage_emotion_outputs_recover_the_change(shared_data):
    rng = random.Random(0)
    turns = list(_sage_user_turns(shared_data))
    assert len(turns) > 1000
    for turn in turns:
        planning = turn["planning"]
        out = parse_emotion(_rebuild(planning, rng))
        assert out["change"] == planning["change"], planning
        assert out["activity"] and not out["activity"].startswith("心理活动")
    # the emotion points of the transcripts agree with the changes (SAGE's own bookkeeping)
    assert sum(1 for t in turns if isinstance(t.get("emotion-point"), int)) == len(turns)


def test_sage_planning_texts(shared_data):
    turns = list(_sage_user_turns(shared_data))
    plans = [parse_plan(t["thinking"]) for t in turns]
    complete = sum(1 for p in plans if all(k in p for k in ("attitude", "goal", "tone", "content")))
    assert complete / len(plans) > 0.99
    with_draft = [(p, t) for p, t in zip(plans, turns) if "Origin:" in t["thinking"]]
    assert with_draft and all(p.get("draft") for p, _ in with_draft)
    assert sum("负面" in p.get("attitude", "") or "正面" in p.get("attitude", "") for p in plans) > len(plans) / 2


def test_an_unlabelled_analysis_block_is_never_taken_as_the_users_message():
    from simulator.user.parsing import ParseError, parse_reply

    block = "Content: the reply lectured me\nReason: it ignored what I said\nChange: -4"
    with pytest.raises(ParseError, match="returned an analysis"):
        parse_reply(block)
    assert parse_reply("Fine. Whatever you say.")["reply"] == "Fine. Whatever you say."
    assert parse_reply("Change is hard, you know?")["reply"] == "Change is hard, you know?"
