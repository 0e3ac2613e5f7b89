"""Parity with SAGE: published transcripts replayed through the lab's own runner reproduce the leaderboard
rows and every dialogue's final emotion; `prompt render` with `sage:DIR` is byte-identical to SAGE's own
functions (run here with their LLM call replaced by a capture)."""
from __future__ import annotations

import copy
import dataclasses
import importlib
import json
import sys

import pytest
from helpers import run_in_process

from simulator.user import rules as rules_mod
from simulator.user.packs import PackError
from simulator.user.reference_packs import SagePack
from trainer.benchmarking import benchmark, protocol

PUBLISHED = {"gpt-4.1": (68.2, 35, 13), "qwen2.5-72b": (19.1, 4, 70)}


def finals(path) -> dict[str, float]:
    return {json.loads(line)["id"]: json.loads(line)["emo_point"] for line in open(path, encoding="utf-8")}


@pytest.mark.process
@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_replay_reproduces_the_published_row_and_every_final_emotion(model, shared_data, tmp_path):
    f = shared_data / "sage" / f"{model}_result.jsonl"
    out = tmp_path / "replayed_result.jsonl"
    r = run_in_process("trainer", "benchmark", "--policy", f"replay:{f}", "--simulator", f"replay:{f}",
                   "--profiles", str(f), "--db", f"sqlite:///{tmp_path / 'lab.db'}", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert (res["score"], res["success"], res["failure"], res["n"], res["n_errors"]) == (*PUBLISHED[model], 100, 0)
    assert finals(out) == finals(f)
    assert res["truncations"] == {"replies_cut": 0, "dialogues_out_of_context": 0}
    # the stored text is exactly what was said: the exported history equals the published one
    published = {json.loads(line)["id"]: json.loads(line)["history"] for line in open(f, encoding="utf-8")}
    for line in open(out, encoding="utf-8"):
        rec = json.loads(line)
        assert [(m["role"], m["content"]) for m in rec["history"]] == \
            [(m["role"], m["content"]) for m in published[rec["id"]]]


def _replay(store, f, limit=0):
    cfg = benchmark.BenchmarkConfig(policy=f"replay:{f}", simulator=f"replay:{f}", profiles=str(f), limit=limit)
    return benchmark.run_benchmark(store, cfg, log=lambda _m: None)


@pytest.mark.parametrize("wrong,expect", [
    (dict(judge_final_reply=True), "the record has no user message after policy reply 10"),
    (dict(max_turns=8), "the lab's rules ended the dialogue after message"),
    (dict(failure_below=20.0), "the lab's rules ended the dialogue after message"),
])
def test_a_wrong_rule_fails_the_replay(wrong, expect, shared_data, store, monkeypatch):
    """Judging the 10th reply, stopping early or failing at 20: the replay no longer matches the record."""
    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    monkeypatch.setitem(rules_mod.RULE_SETS, "standard", dataclasses.replace(rules_mod.RULE_SETS["standard"], **wrong))
    result = _replay(store, f)
    assert result.summary.n_errors > 0
    assert (result.summary.score, result.summary.success, result.summary.failure) != PUBLISHED["gpt-4.1"]
    from trainer.benchmarking.eval_runs import scored_dialogues

    errors = [d["error"] for d in scored_dialogues(store, result.eval_run_id) if d["error"]]
    assert any(expect in e for e in errors), errors[:3]


def test_replay_recorded_as_such_with_its_protocol(shared_data, store):
    f = shared_data / "sage" / "qwen2.5-72b_result.jsonl"
    result = _replay(store, f, limit=5)
    from trainer.benchmarking.eval_runs import get_eval_run, leaderboard

    run = get_eval_run(store, result.eval_run_id)
    assert run["simulator_fingerprint"]["backend"] == "replay" and len(run["simulator_fingerprint"]["file_sha256"]) == 64
    assert run["protocol"]["version"] == protocol.PROTOCOL_VERSION and run["model_ref"] == f"replay:{f.name}"
    group = next(g for g in leaderboard(store) if not g["published"])
    assert group["replay"] and group["protocol_hash"] == run["protocol"]["protocol_hash"]


def test_runs_with_different_protocols_are_not_ranked_together(shared_data, store, monkeypatch):
    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    _replay(store, f, limit=3)
    from simulator.user.packs import OwnPack

    monkeypatch.setattr(OwnPack, "policy_system_prompt", lambda self, language="zh": "另一个系统提示")
    _replay(store, f, limit=3)
    from trainer.benchmarking.eval_runs import leaderboard

    groups = [g for g in leaderboard(store) if not g["published"]]
    assert len(groups) == 2 and len({g["protocol_hash"] for g in groups}) == 2


# ------------------------------------------------------------------------------ prompt packs
def _sage_modules(reference):
    sys.path.insert(0, str(reference / "sage"))
    try:
        sr = importlib.import_module("simulator_response")
        npc = importlib.import_module("npc_response")
    finally:
        sys.path.remove(str(reference / "sage"))
    return sr, npc


def _render(req: dict) -> list[dict]:
    r = run_in_process("simulator", "prompt", "render", stdin=json.dumps(req, ensure_ascii=False))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["messages"]


def test_prompt_render_with_sage_pack_is_byte_identical_to_sages_functions(shared_data, shared_reference):
    sr, npc = _sage_modules(shared_reference)
    captured: list = []
    sr.call_llm = lambda prompt: captured.append(prompt) or (
        "Content:\n[a]\nTargetCompletion:\n[b]\nActivity:\n[c]\nAnalyse:\n[d]\nChange:\n-5"
        if "Change:\n[" in prompt and "Content:" in prompt else "Thinking:\nt\nResponse:\nr")
    npc.call_llm = lambda history: captured.append(history) or "ok"
    profiles = [json.loads(line) for line in open(shared_data / "rlver" / "test_profile.jsonl", encoding="utf-8")]
    records = [json.loads(line) for line in open(shared_data / "sage" / "gpt-4.1_result.jsonl", encoding="utf-8")]
    pack = f"sage:{shared_reference / 'sage'}"
    requests, expected = [], []
    for k, (prof, rec) in enumerate(zip(profiles[::17], records[::17])):
        hist = [{"role": m["role"], "content": m["content"]} for m in rec["history"]]
        cut = min(len(hist), 2 * (k % 5) + 2)  # histories of 2..10 messages, each ending on the policy's reply
        cut -= cut % 2 == 1
        history, emo = hist[:cut], rec["history"][cut - 2].get("emotion-point", 40)
        player = {"id": prof["id"], "emo_point": emo, "emo_state": "Emotion-" + rules_mod.tier(emo),
                  "player": prof["player"], "scene": prof["scene"], "target": slice(None),
                  "history": copy.deepcopy(history)}
        # SAGE's planning_reply indexes target_prompt with player_data["target"] after the slot is already
        # filled (it does not run as released); slice(None) makes that second replace the no-op it must be.
        captured.clear()
        _, planning = sr.planning_reply(copy.deepcopy(player))
        requests.append({"pack": pack, "profile": prof, "step": "emotion", "emotion": emo, "history": history})
        expected.append(captured[0])
        after = dict(player, emo_point=emo - 5, emo_state="Emotion-" + rules_mod.tier(emo - 5))
        captured.clear()
        sr.player_reply(copy.deepcopy(after), dict(planning))
        requests.append({"pack": pack, "profile": prof, "step": "reply", "emotion": emo - 5, "history": history,
                         "planning": {k2: planning[k2] for k2 in ("TargetCompletion", "activity", "analyse")}})
        expected.append(captured[0])
    captured.clear()
    sr.player_reply(dict(player, history=[]), {})  # the opening: no history, no analysis
    requests.append({"pack": pack, "profile": prof, "step": "reply", "emotion": 40, "history": []})
    expected.append(captured[0])
    assert len(requests) >= 13
    for req, want in zip(requests, expected):
        got = _render(req)
        assert len(got) == 1 and got[0]["role"] == "user"
        assert got[0]["content"] == want
    captured.clear()
    npc.call_npc(records[0]["history"][:1])
    assert SagePack(str(shared_reference / "sage")).policy_system_prompt() == captured[0][0]["content"]


def test_sage_pack_parses_as_sage_does(shared_reference):
    pack = SagePack(str(shared_reference / "sage"))
    text = "**Content：**\n[说了什么]\nTargetCompletion:\n[部分]\nActivity:\n[想法]\nAnalyse:\n[感受]\nChange:\n[ +15 分]"
    assert pack.parse_emotion(text) == {"content": "说了什么", "TargetCompletion": "部分", "activity": "想法",
                                        "analyse": "感受", "change": 15}  # the rules clamp it, not the parser
    assert pack.parse_reply("Thinking:\nplan\nOrigin:\nx\nChange:\ny\nResponse:\n“好吧，随便你。”") == \
        {"reply": "好吧，随便你。", "planning": "plan\nOrigin:\nx\nChange:\ny"}
    assert pack.label(39) == "Emotion-C" and pack.label(100) == "Emotion-S"
    fp = pack.fingerprint()
    assert fp["pack"] == "sage" and set(fp["files_sha256"]) == {"simulator_response.py", "npc_response.py"}


@pytest.mark.process
def test_unknown_or_changed_sage_files_are_named(shared_reference, tmp_path):
    with pytest.raises(PackError, match="simulator_response.py: file not found"):
        SagePack(str(tmp_path))
    changed = tmp_path / "sage"
    changed.mkdir()
    src = (shared_reference / "sage" / "simulator_response.py").read_text(encoding="utf-8")
    (changed / "simulator_response.py").write_text(src.replace("def player_reply(", "def reply_of_player("),
                                                    encoding="utf-8")
    with pytest.raises(PackError, match=r"player_reply\(\) not found"):
        SagePack(str(changed))
    (changed / "simulator_response.py").write_text(src.replace("{{simulator_scene}}", "{{scene}}"), encoding="utf-8")
    with pytest.raises(PackError, match="no {{simulator_scene}} slot"):
        SagePack(str(changed))
    r = run_in_process("simulator", "prompt", "render", stdin=json.dumps({"pack": f"sage:{changed}", "profile": {},
                                                                      "step": "emotion", "history": []}))
    assert r.returncode == 2 and "simulator_scene" in r.stderr


def test_sage_pack_drives_a_live_benchmark_against_an_openai_server(shared_data, shared_reference, store,
                                                                    monkeypatch):
    """The pack end to end over real HTTP: the simulator endpoint receives SAGE's exact prompt as one user
    message, its answer is parsed as SAGE parses it, and the policy gets SAGE's system prompt."""
    from testkit.scripted_server import ScriptedServer

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    pack = SagePack(str(shared_reference / "sage"))
    with ScriptedServer().start() as srv:
        cfg = benchmark.BenchmarkConfig(policy="openai:policy", policy_base_url=srv.base_url,
                                        simulator="openai:deepseek-v3", simulator_base_url=srv.base_url,
                                        prompt_pack=f"sage:{shared_reference / 'sage'}", profiles=str(f), limit=2)
        result = benchmark.run_benchmark(store, cfg, log=lambda _m: None)
        bodies = list(srv.requests)
        roles = dict(srv.roles)
    assert result.summary.n == 2 and result.summary.n_errors == 0, result
    assert roles.get("sage_emotion", 0) > 0 and roles.get("sage_reply", 0) == roles["sage_emotion"]
    sim_bodies = [b for b in bodies if b["model"] == "deepseek-v3"]
    assert sim_bodies and all(len(b["messages"]) == 1 and b["messages"][0]["role"] == "user" for b in sim_bodies)
    policy_bodies = [b for b in bodies if b["model"] == "policy"]
    assert all(b["messages"][0] == {"role": "system", "content": pack.policy_system_prompt()} for b in policy_bodies)
    assert all("max_tokens" not in b for b in policy_bodies)  # no per-reply cap, as SAGE
    assert result.protocol["policy_system_prompts"]["zh"] == pack.policy_system_prompt()
    from storage.dialogues import load_dialogue

    d = load_dialogue(store, result.dialogue_ids[0])
    judged = [t for t in d["turns"] if t["role"] == "user" and t["delta"] is not None][1:]
    assert judged and all(abs(t["delta"]) <= 10 for t in judged)
    assert all(t["inner"].get("TargetCompletion") for t in judged)


def _rlver_simulator(reference, answers: dict):
    """RLVER's PlayerSimulator methods, cut from the released file (which does not parse as a whole) and run
    with call_api replaced by a capture."""
    import re as re_mod
    import time as time_mod

    from simulator.user.reference_packs import RlverPack

    path = reference / "rlver" / "hard_player_simulator_dsv3.py"
    text = path.read_text(encoding="utf-8")
    captured: list = []
    ns = {"json": json, "re": re_mod, "time": time_mod, "copy": copy, "target_prompt": RlverPack._targets(path, text),
          "call_api": lambda prompt, mode="dsv3": captured.append(prompt) or answers["emotion" if "Reason:" in prompt
                                                                                  else "reply"]}
    body = ""
    for name in ("planning_reply", "player_reply"):
        start = text.index(f"    def {name}(")
        body += text[start:text.index("\n    def ", start + 1)] + "\n"
    exec(compile("class Sim:\n" + body, str(path), "exec"), ns)
    sim = ns["Sim"]()
    sim.header, sim.emo_count = {}, {"Emotion-S": 100, "Emotion-A": 70, "Emotion-B": 40, "Emotion-C": 10}
    return sim, captured


def test_rlver_pack_is_byte_identical_to_rlvers_simulator(shared_data, shared_reference):
    from simulator.user.reference_packs import RlverPack

    answers = {"emotion": "Content:\n[a]\nReason:\n[b\n\nc]\nActivity:\n[d]\nAnalyse:\n[e]\nChange:\n-12",
               "reply": "Thinking:\nt\n\nu\nResponse:\n“好吧”"}
    sim, captured = _rlver_simulator(shared_reference, answers)
    pack = RlverPack(str(shared_reference / "rlver"))
    profiles = [json.loads(line) for line in open(shared_data / "rlver" / "train_profile.jsonl", encoding="utf-8")]
    records = [json.loads(line) for line in open(shared_data / "sage" / "qwen2.5-72b_result.jsonl", encoding="utf-8")]
    for k, (prof, rec) in enumerate(zip(profiles[::50], records[::10])):
        history = [{"role": m["role"], "content": m["content"]} for m in rec["history"][:2 * (k % 4) + 2]]
        sim.emo_point = 30 + k
        player = {"player": prof["player"], "scene": prof["scene"], "target": "eq", "emo_point": sim.emo_point,
                  "emo_state": "Emotion-C", "history": copy.deepcopy(history)}
        captured.clear()
        after, planning = sim.planning_reply(copy.deepcopy(player))
        assert pack.emotion_messages(prof, 30 + k, history)[0]["content"] == captured[0]
        parsed = pack.parse_emotion(answers["emotion"])
        assert {key: parsed[key] for key in planning if key != "change"} == \
            {key: v for key, v in planning.items() if key != "change"}
        assert parsed["change"] == int(planning["change"]) == -12  # RLVER keeps the text; it is not clamped
        captured.clear()
        sim.player_reply(copy.deepcopy(after), dict(planning))
        assert pack.reply_messages(prof, after["emo_point"], history, parsed)[0]["content"] == captured[0]
    captured.clear()
    out = sim.player_reply(dict(player, history=[]), {})
    assert pack.reply_messages(prof, 30, [], None)[0]["content"] == captured[0]
    assert pack.parse_reply(answers["reply"]) == {"reply": out["history"][-1]["content"],
                                                  "planning": out["history"][-1]["thinking"]}
