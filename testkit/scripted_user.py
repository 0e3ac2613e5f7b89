"""The scripted simulated user's side of testkit.scripted_server: which step a request is, the word rules
that score a partner's reply, and the answers in the simulator's formats."""
from __future__ import annotations

import json
import random
import re
from typing import Any, Sequence

from testkit import scripted_judge

_SUPPORT = re.compile(r"understand|hear you|sounds|makes sense|proud|impressive|admire|brave|you did|not your fault|"
                      r"with you|listening|理解|辛苦|不容易|感受|陪着|你做得", re.I)
_DISMISS = re.compile(r"get over|whatever|calm down|overreact|not a big deal|\bbye\b|as an ai|language model|"
                      r"just relax|想开点|别想了|没什么大不了", re.I)
_REPLIES = {
    "A": ["Yeah... that's really it. There's more, actually.", "Thank you. It helps to hear that.",
          "Okay. I think I can say the rest now."],
    "B": ["Hm, maybe. It's still on my mind.", "I guess. It's complicated.", "That's fair. I don't know yet."],
    "C": ["That's not really what I meant.", "You're not listening.", "Everyone says that."],
}
_REPLIES_ZH = {"A": ["嗯……就是这样。其实还有一些事。", "谢谢你，听你这么说好多了。"],
               "B": ["也许吧，我还是放不下。", "说不好，挺复杂的。"],
               "C": ["不是这个意思。", "你根本没在听。"]}


def classify_request(messages: Sequence[dict]) -> str:
    """'judge' | 'emotion' | 'reply' | 'opening' | 'sage_emotion' | 'sage_reply' | 'policy' from the sections
    the messages ask for."""
    if scripted_judge.is_judge_request(messages):
        return "judge"
    text = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    if len(messages) == 1 and "TargetCompletion:\n" in text and "Change:\n" in text:
        return "sage_emotion"
    if len(messages) == 1 and "Thinking:\n" in text and "Response:\n" in text:
        return "sage_reply"
    if "[Emotion change]" in text or "[情绪变化]" in text:
        return "emotion"
    if "[Plan]" in text or "[回复规划]" in text:
        return "reply"
    if "[Opening]" in text or "[开场白]" in text:
        return "opening"
    return "policy"


def score_reply(reply: str) -> int:
    """The scripted emotion change of a partner reply: word rules, clamped to [-10, 10]."""
    text = reply.strip()
    if not text or sum(c.isalnum() for c in text) < 0.5 * len(text.replace(" ", "")):
        return -10
    change = 1 + 2 * min(3, len(_SUPPORT.findall(text))) - 3 * len(_DISMISS.findall(text))
    if text.count("?") + text.count("？") > 2:
        change -= 4
    if len(text.split()) > 150:
        change -= 3
    return max(-10, min(10, change))


def emotion_text(change: int, zh: bool, rng: random.Random) -> str:
    """An emotion-step answer in the lab's bracketed format, with the format drift real models show."""
    fit = "fits" if change > 3 else "partly" if change >= 0 else "misses"
    if zh:
        fit_zh = {"fits": "贴合", "partly": "部分贴合", "misses": "偏离"}[fit]
        num = rng.choice([f"{change:+d}", f"{change}分", f"[ {change} ]"])
        colon = rng.choice([":", "："])
        return (f"[NPC想要表达的内容]\n对方想安慰我。\n[人物对话目的是否达到]\n{fit_zh}\n[心理活动]\n我在想对方是不是真的懂。\n"
                f"[人物对NPC回复的感受]\n说不上来。\n【情绪变化】{colon}{num}")
    num = rng.choice([f"{change:+d}", f"[ {change} ]", f"{change} points"])
    header = rng.choice(["[Emotion change]\n", "**Emotion change**: ", "Change: "])
    return (f"[Partner's meaning]\nThey want to comfort me.\n[Need fit]\n{fit}, judging by what they said.\n"
            f"[Inner activity]\nI wonder whether they really get it.\n[Felt reaction]\nHard to say.\n{header}{num}")


def tier_message(t: str, zh: bool, rng: random.Random) -> str:
    """The user's message at tier `t`: a goodbye at S and F, else one of the tier's canned lines."""
    if t in ("S", "F"):
        return (("谢谢你，真的好多了。再见。" if t == "S" else "算了，不聊了。再见。") if zh else
                ("Thank you, really. I feel so much lighter. Goodbye." if t == "S" else "Forget it. Bye."))
    return rng.choice((_REPLIES_ZH if zh else _REPLIES)[t])


def reply_text(t: str, zh: bool, rng: random.Random) -> str:
    """A reply-step answer for tier `t`: a plan and a message, goodbye at S and F."""
    msg = tier_message(t, zh, rng)
    leave = ("是" if zh else "yes") if t in ("S", "F") else ("否" if zh else "no")
    if zh:
        return f"[回复规划]\n1. 回复态度：{t}\n2. 回复目标：继续倾诉\n3. 说话语气：自然\n4. 说话内容：补充细节\n[回复]\n{msg}\n[是否结束]\n{leave}"
    return (f"[Plan]\n1. Attitude: tier {t}\n2. Goal: keep talking\n3. Tone: plain\n4. Content: a detail\n"
            f"[Reply]\n{msg}\n[Leave]\n{leave}")


def as_json(text: str) -> str:
    """'Key:\nvalue' sections (SAGE-format answers) as one JSON object; Change as an integer."""
    parts = re.split(r"^(\w+):\n", text, flags=re.M)[1:]
    data: dict[str, Any] = {k: v.strip().strip("[]") for k, v in zip(parts[::2], parts[1::2])}
    if "Content" in data:
        data["Change"] = int(data["Change"])
    return json.dumps(data, ensure_ascii=False)
