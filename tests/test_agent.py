"""The Sentient Agent: prompts by language, steps, ends, bad replies, fingerprint."""
import asyncio

import pytest
from conftest import make_sim_profile
from helpers import play_dialogue as dialogue

from simulator.llm.hashing import fingerprint_hash
from simulator.user.agent import MAX_REPLY_CHARS, SentientAgent, UserTurn
from simulator.user.backends import make_backend
from simulator.user.rules import EmotionRules, get_rules
from simulator.user.templates import load_templates, prompt_hash
from testkit.scripted_server import classify_request, start_server

GOOD = "I hear you. Covering all those shifts was a lot, and you did it well."


@pytest.fixture(scope="module")
def server():
    with start_server() as s:
        yield s


def chat_backend(server):
    return make_backend("openai:sim", base_url=server.base_url, api_key="k", timeout=5, max_retries=1, backoff_s=0.01)


def test_english_dialogue_through_an_llm_endpoint_v1_pack(server):
    profile = make_sim_profile(first_line="")
    agent = SentientAgent(profile, chat_backend(server), pack="v1")
    start = len(server.requests)
    turns = asyncio.run(dialogue(agent, [GOOD] * 3))
    assert turns[0].text.startswith("Hey") and turns[0].emotion == 40 and turns[0].delta == 0
    assert [t.emotion for t in turns[1:]] == [45, 50, 55]  # the scripted server scores GOOD +5
    second = turns[1]
    assert second.inner["fit"] == "fits" and second.inner["planning"].startswith("1. Attitude")
    assert second.inner["raw"]["emotion"] and second.n_tokens > 0 and second.outcome == ""
    roles = [classify_request(b["messages"]) for b in server.requests[start:]]
    assert roles == ["opening", "emotion", "reply"] * 1 + ["emotion", "reply"] * 2
    emotion_prompt = server.requests[start + 1]["messages"]
    system, user = emotion_prompt[0]["content"], emotion_prompt[1]["content"]
    assert profile.hidden_need in system and profile.background in system and "It is 40 now (tier B)" in system
    assert f"<<<\n{GOOD}\n>>>" in user and "-10 to +10" in user
    reply_prompt = server.requests[start + 2]["messages"][1]["content"]
    assert "Your emotion is 45 (tier B); it changed by +5" in reply_prompt and f"Partner: {GOOD}" in reply_prompt


def test_chinese_profile_uses_chinese_prompts(server):
    profile = make_sim_profile(language="zh", first_line="最近有件事挺烦的。", personality="passive")
    agent = SentientAgent(profile, chat_backend(server), pack="v1")
    start = len(server.requests)
    turns = asyncio.run(dialogue(agent, ["我理解你，你真的很不容易，辛苦了。"]))
    assert turns[0].text == "最近有件事挺烦的。" and turns[1].delta > 0 and turns[1].outcome == ""
    system = server.requests[start]["messages"][0]["content"]
    assert "你隐藏的需求" in system and "被动型" in system
    reply_system = server.requests[start + 1]["messages"][0]["content"]
    assert "不要提任何问题" in reply_system  # passive personas ask no questions
    assert turns[1].text and "[" not in turns[1].text


def test_rules_reach_the_prompt(server):
    profile = make_sim_profile()
    agent = SentientAgent(profile, chat_backend(server), rules=get_rules("challenging"), pack="v1")
    start = len(server.requests)
    asyncio.run(agent.respond([], GOOD))
    system, user = (m["content"] for m in server.requests[start]["messages"])
    assert "It is 30 now" in system and "only a reply that clearly serves your hidden need" in system
    assert "-15 to +10" in user
    agent = SentientAgent(profile, chat_backend(server), rules=get_rules("training"), pack="v1")
    asyncio.run(agent.respond([], GOOD))
    assert "-12, -4 or +6" in server.requests[-2]["messages"][1]["content"]


def test_ends_success_failure_and_turn_cap(server):
    profile = make_sim_profile()
    ok = asyncio.run(dialogue(SentientAgent(profile, chat_backend(server), rules=EmotionRules(start=90)), [GOOD] * 5))
    assert ok[-1].outcome == "success" and ok[-1].done and ok[-1].emotion == 100 and "Goodbye" in ok[-1].text
    bad = asyncio.run(dialogue(SentientAgent(profile, chat_backend(server), rules=EmotionRules(start=20)),
                               ["Whatever, get over it, calm down."] * 5))
    assert bad[-1].outcome == "failure" and bad[-1].emotion < 10 and len(bad) == 3
    agent = SentientAgent(profile, chat_backend(server), rules=EmotionRules(max_turns=2))
    capped = asyncio.run(dialogue(agent, ["Okay."] * 5))
    assert [t.outcome for t in capped[1:]] == ["", "max_turns"] and agent.turns == 2
    late = asyncio.run(agent.respond([], "Still there?"))
    assert late.outcome == "error" and "already ended (max_turns)" in late.error and agent.outcome == "max_turns"


def test_an_end_word_in_the_users_message_ends_the_dialogue_not_a_flag(server):
    """SAGE ends when the user's message contains an end word; a model's own "leave" flag does not."""
    class Rewriting:
        name, native_steps, model = "rewriting", False, "x"

        def __init__(self, inner, old, new):
            self.inner, self.old, self.new = inner, old, new

        def fingerprint(self):
            return self.inner.fingerprint()

        async def complete(self, messages):
            comp = await self.inner.complete(messages)
            comp.text = comp.text.replace(self.old, self.new)
            return comp

    flagged = Rewriting(chat_backend(server), "[Leave]\nno", "[Leave]\nyes")
    turn = asyncio.run(SentientAgent(make_sim_profile(), flagged, pack="v1").respond([], "Okay."))
    assert turn.outcome == "" and not turn.done
    waving = Rewriting(chat_backend(server), "[Leave]", "Anyway, goodbye.\n[Leave]")
    turn = asyncio.run(SentientAgent(make_sim_profile(), waving, pack="v1").respond([], "Okay."))
    assert "goodbye" in turn.text and turn.outcome == "goodbye" and turn.done


def test_oversized_and_empty_replies(server):
    agent = SentientAgent(make_sim_profile(), chat_backend(server))
    huge = asyncio.run(agent.respond([], "x" * 1_000_000))
    assert huge.outcome == "error" and f"1000000 characters; the limit is {MAX_REPLY_CHARS}" in huge.error
    empty = asyncio.run(SentientAgent(make_sim_profile(), chat_backend(server)).respond([], ""))
    assert empty.delta == -10 and empty.outcome == ""  # an empty reply is judged, very negatively


def test_trailing_reply_in_history_is_not_shown_twice(server):
    agent = SentientAgent(make_sim_profile(), chat_backend(server), pack="v1")
    start = len(server.requests)
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": GOOD}]
    asyncio.run(agent.respond(history, GOOD))
    user = server.requests[start]["messages"][1]["content"]
    assert user.count(GOOD) == 1


def test_backend_bug_becomes_an_error_turn():
    class Broken:
        name, native_steps, model = "broken", True, ""

        def fingerprint(self):
            return {"backend": "broken"}

        async def emotion_step(self, *a):
            raise ZeroDivisionError("oops")

    turn = asyncio.run(SentientAgent(make_sim_profile(), Broken()).respond([], "hello"))
    assert isinstance(turn, UserTurn) and turn.outcome == "error" and "ZeroDivisionError: oops" in turn.error


def test_fingerprint(server):
    profile = make_sim_profile()
    a = SentientAgent(profile, chat_backend(server), pack="v1")
    fp = a.fingerprint()
    assert fp["backend"] == "openai" and fp["model"] == "sim" and fp["endpoint"].startswith("127.0.0.1:")
    assert fp["prompt_hash"] == prompt_hash() and fp["rules"]["max_delta"] == 10
    own = SentientAgent(profile, chat_backend(server)).fingerprint()  # the default pack
    assert own["prompt_pack"]["pack"] == "own" and "prompt_hash" not in own
    assert fingerprint_hash(own) != fingerprint_hash(fp)
    assert a.fingerprint_hash() == fingerprint_hash(fp) and len(a.fingerprint_hash()) == 16
    b = SentientAgent(profile, chat_backend(server), rules=get_rules("challenging"), pack="v1")
    assert b.fingerprint_hash() != a.fingerprint_hash()
    assert "sampling" in fp and "k" not in fp.values()


def test_templates_exist_for_both_languages():
    for lang in ("en", "zh"):
        t = load_templates(lang)
        assert all(t[k] for k in ("persona", "emotion", "reply", "opening", "repair"))
    with pytest.raises(ValueError, match="no prompt templates for language 'fr'"):
        load_templates("fr")


def test_own_pack_follows_sages_structure_over_http(server):
    """Default pack: each step is ONE user message; the emotion step gets the number and the dialogue as
    JSON (roles you / partner), the reply step only the tier label plus objective and subjective analysis."""
    import json

    profile = make_sim_profile(first_line="")
    agent = SentientAgent(profile, chat_backend(server))
    start = len(server.requests)
    turns = asyncio.run(dialogue(agent, [GOOD] * 2))
    assert turns[0].text and turns[0].emotion == 40 and turns[0].delta == 0  # the opening: no emotion step
    assert [t.emotion for t in turns[1:]] == [45, 50]  # the scripted server scores GOOD +5
    assert turns[1].inner["TargetCompletion"] and turns[1].inner["raw_change"] == 5
    roles = [classify_request(b["messages"]) for b in server.requests[start:]]
    assert roles == ["sage_reply", "sage_emotion", "sage_reply", "sage_emotion", "sage_reply"]
    bodies = [b["messages"] for b in server.requests[start:]]
    assert all(len(m) == 1 and m[0]["role"] == "user" for m in bodies)
    emotion_prompt = bodies[1][0]["content"]
    assert profile.persona.splitlines()[0] in emotion_prompt and "\n40\n" in emotion_prompt
    shown = json.loads(emotion_prompt[emotion_prompt.rindex("[\n  {"):])
    assert shown == [{"role": "you", "content": turns[0].text}, {"role": "partner", "content": GOOD}]
    assert "-10" not in emotion_prompt and "+10" not in emotion_prompt  # a signed change, no stated range
    reply_prompt = bodies[2][0]["content"]
    assert reply_prompt.rstrip().endswith("on your own.") and "Emotion-B\n" in reply_prompt
    assert "\n45\n" not in reply_prompt  # only the tier label, never the number
    assert "Objective reading" in reply_prompt and "Subjective reading" in reply_prompt
    assert "Thinking:" in reply_prompt and "Origin:" in reply_prompt and "Response:" in reply_prompt


def test_own_pack_in_chinese_and_for_passive_personas(server):
    profile = make_sim_profile(language="zh", first_line="最近有件事挺烦的。", personality="passive")
    agent = SentientAgent(profile, chat_backend(server))
    start = len(server.requests)
    turns = asyncio.run(dialogue(agent, ["我理解你，你真的很不容易，辛苦了。"]))
    assert turns[0].text == "最近有件事挺烦的。" and turns[1].delta > 0 and "再见" not in turns[1].text
    emotion_prompt = server.requests[start]["messages"][0]["content"]
    assert '"role": "你"' in emotion_prompt and '"role": "NPC"' in emotion_prompt
    assert "不主动提问" in server.requests[start + 1]["messages"][0]["content"]  # passive: asks nothing
    assert "不主动提问" not in agent.pack.reply_messages({"player": "x", "scene": "y", "main_cha": "负面型"}, 40,
                                                         [], None)[0]["content"]


def test_own_pack_asks_the_same_prompt_again_on_an_unreadable_answer():
    profile = make_sim_profile()
    with start_server(fault_rate=1.0, faults=("wrong_format",)) as server:
        agent = SentientAgent(profile, chat_backend(server), max_repairs=2)
        turn = asyncio.run(agent.respond([{"role": "user", "content": profile.first_line}], GOOD))
        assert turn.outcome == "error" and "unreadable simulator output after 3 attempts" in turn.error
        assert server.calls == 3 and all(r["messages"] == server.requests[0]["messages"] for r in server.requests)


def test_own_pack_structured_mode_sends_a_schema_and_reads_json(server):
    from simulator.user.packs import EMOTION_KEYS, REPLY_KEYS

    agent = SentientAgent(make_sim_profile(), chat_backend(server), pack="own:json")
    start = len(server.requests)
    turn = asyncio.run(agent.respond([{"role": "user", "content": "hi"}], GOOD))
    assert turn.outcome == "" and turn.delta == 5 and turn.text and not turn.text.startswith("{")
    emotion_body, reply_body = server.requests[start:start + 2]
    schema = emotion_body["response_format"]["json_schema"]["schema"]
    assert tuple(schema["required"]) == EMOTION_KEYS and schema["properties"]["Change"]["type"] == "integer"
    assert tuple(reply_body["response_format"]["json_schema"]["schema"]["required"]) == REPLY_KEYS
    assert agent.fingerprint()["prompt_pack"]["structured"] is True
    plain = SentientAgent(make_sim_profile(), chat_backend(server))
    start = len(server.requests)
    asyncio.run(plain.respond([{"role": "user", "content": "hi"}], GOOD))
    assert all("response_format" not in b for b in server.requests[start:])
    assert plain.fingerprint_hash() != agent.fingerprint_hash()
