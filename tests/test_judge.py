"""The social-cognition judge: parsing, the prompt file and its fingerprint, and `python -m trainer judge`
against the real scripted OpenAI-compatible server on 127.0.0.1 (ratings, fenced JSON, a repaired answer,
garbage, a refusal, a timeout and an empty dialogue in one batch), stored per dialogue in a real SQLite
file, and the Benchmark view's radar built from them."""
from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

import pytest
from helpers import COLD_REPLIES, WARM_REPLIES, store_judged_dialogues
from sqlalchemy import delete, select

from simulator.evaluation.judge import (
    DIMENSIONS,
    AnswerParseError,
    JudgeInput,
    judge_messages,
    load_prompt,
    parse_judgement,
)
from storage import Dialogue, JudgeScore, as_dict, read_scope, session_scope
from testkit.scripted_server import start_server
from trainer.__main__ import main


def _judge(capsys, server, *args: str) -> tuple[int, dict]:
    code = main(["judge", *args, "--model", "scripted", "--base-url", server.base_url, "--json"])
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1]) if out else {}


def _rows(store) -> dict[int, SimpleNamespace]:
    """dialogue id -> its stored judge row (attributes as in storage.JudgeScore)."""
    with read_scope(store) as s:
        return {r.dialogue_id: SimpleNamespace(**as_dict(r))
                for r in s.scalars(select(JudgeScore))}


# ------------------------------------------------------------------------------------------------ parsing
def test_parse_accepts_the_shapes_models_write():
    clean = {d: {"score": 4, "reason": "fine"} for d in DIMENSIONS}
    assert parse_judgement(json.dumps(clean)) == ({d: 4 for d in DIMENSIONS}, {d: "fine" for d in DIMENSIONS})
    fenced = "Sure, here it is:\n```json\n" + json.dumps(clean) + "\n```\nHope this helps."
    assert parse_judgement(fenced)[0] == {d: 4 for d in DIMENSIONS}
    spelled = {d.replace("_", " ").title(): {"score": "3/5", "reason": "x"} for d in DIMENSIONS}
    assert parse_judgement(json.dumps(spelled))[0] == {d: 3 for d in DIMENSIONS}
    bare = {"scores": {d: 5.0 for d in DIMENSIONS}}
    assert parse_judgement(json.dumps(bare)) == ({d: 5 for d in DIMENSIONS}, {d: "" for d in DIMENSIONS})


@pytest.mark.parametrize("answer, problem", [
    ("The assistant was kind.", "no JSON object found"),
    (json.dumps({d: {"score": 4} for d in DIMENSIONS[:3]}), "missing dialogue_guidance, style_adaptability"),
    (json.dumps({d: {"score": 7} for d in DIMENSIONS}), "empathic_depth: score 7 is outside 1..5"),
    (json.dumps({d: {"score": "good"} for d in DIMENSIONS}), "empathic_depth: score 'good' is not a whole"),
    ("[1, 2, 3]", "a JSON list, not an object"),
])
def test_parse_names_what_is_wrong(answer: str, problem: str):
    with pytest.raises(AnswerParseError, match=problem):
        parse_judgement(answer)


def test_the_prompt_is_a_versioned_file_whose_hash_is_recorded(tmp_path):
    from simulator.evaluation.judge import PROMPT_DIR

    prompt = load_prompt("v1")
    assert prompt["sha256"] == hashlib.sha256((PROMPT_DIR / "v1.md").read_bytes()).hexdigest()
    item = JudgeInput(1, [{"role": "user", "content": "hi {dialogue}"}, {"role": "assistant", "content": "hello"}],
                      {"hidden_need": "to be heard"})
    system, user = judge_messages(item, prompt)
    assert all(d in system["content"] for d in DIMENSIONS)
    assert "User: hi {dialogue}\n\nAssistant: hello" in user["content"]  # inserted text is not re-filled
    assert "What they needed, unsaid: to be heard" in user["content"]
    with pytest.raises(ValueError, match="judge prompt version 'v9' not found; available: v1"):
        load_prompt("v9")


# ------------------------------------------------------------------------------------------ the CLI, end to end
def test_judge_command_scores_an_eval_run_and_reports_each_failure(store, db_url, capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-judge-test")
    ids = store_judged_dialogues(store, {
        "warm": WARM_REPLIES, "cold": COLD_REPLIES, "fenced": ["judge-mode:fenced " + WARM_REPLIES[0]],
        "repaired": ["judge-mode:garbage_once " + WARM_REPLIES[0]], "garbage": ["judge-mode:garbage ok"],
        "refusal": ["judge-mode:refusal ok"], "hang": ["judge-mode:hang ok"], "empty": []})
    with session_scope(store) as s:
        run_id = s.get(Dialogue, ids["warm"]).eval_run_id
    with start_server(api_key="sk-judge-test", hang_s=5.0) as server:
        code, out = _judge(capsys, server, "--eval-run", str(run_id), "--db", db_url, "--timeout", "1",
                           "--max-retries", "0")
        bodies = [b for b in server.requests if "response_format" in b]
    assert code == 0
    assert (out["dialogues"], out["judged"], out["ok"]) == (8, 8, 4)
    assert out["errors"] == {"parse": 1, "refusal": 1, "timeout": 1, "empty": 1}
    assert bodies and bodies[0]["response_format"]["json_schema"]["name"] == "social_cognition_scores"

    rows = _rows(store)
    assert {n for n, i in ids.items() if rows[i].status == "ok"} == {"warm", "cold", "fenced", "repaired"}
    warm, cold = rows[ids["warm"]], rows[ids["cold"]]
    assert set(warm.scores) == set(DIMENSIONS) and all(1 <= v <= 5 for v in warm.scores.values())
    assert warm.scores["empathic_depth"] > cold.scores["empathic_depth"] and warm.mean > cold.mean
    assert warm.reasons["core_insight"].startswith("scripted:") and warm.eval_run_id == run_id
    assert rows[ids["repaired"]].attempts == 2 and rows[ids["fenced"]].attempts == 1
    garbage = rows[ids["garbage"]]
    assert garbage.attempts == 2 and "after the repair request: no JSON object found" in garbage.error
    assert "declined" in rows[ids["refusal"]].error and rows[ids["refusal"]].error_kind == "refusal"
    assert "timed out" in rows[ids["hang"]].error and rows[ids["empty"]].error_kind == "empty"
    fp = warm.judge_fingerprint
    assert (fp["model"], fp["endpoint"], fp["temperature"], fp["prompt_version"], fp["response_format"]) == (
        "scripted", server.base_url.split("/")[2], 0.0, "v1", "json_schema")
    assert fp["prompt_sha256"] == load_prompt("v1")["sha256"] and fp["max_tokens"] == 1024

    # a second run of the same judge (same endpoint) keeps the rated dialogues and tries the failed ones again
    port = int(server.base_url.split(":")[2].split("/")[0])
    with start_server(api_key="sk-judge-test", hang_s=5.0, port=port) as server:
        code, again = _judge(capsys, server, "--eval-run", str(run_id), "--db", db_url, "--timeout", "1",
                             "--max-retries", "0")
    assert (again["skipped"], again["judged"], again["ok"]) == (4, 4, 0) and code == 1
    assert len(_rows(store)) == 8  # replaced, not added


def test_judge_without_json_schema_and_on_a_collection(store, db_url, capsys):
    ids = store_judged_dialogues(store, {"a": WARM_REPLIES, "b": COLD_REPLIES}, eval_run=False)
    with start_server() as server:
        code, out = _judge(capsys, server, "--collection", "judge-test", "--no-json-schema", "--db", db_url)
        assert not any("response_format" in b for b in server.requests)
    assert code == 0 and out["ok"] == 2 and out["fingerprint"]["response_format"] == "none"
    assert set(out["means"]) == set(DIMENSIONS)
    with session_scope(store) as s:  # a deleted dialogue takes its ratings with it
        s.execute(delete(Dialogue).where(Dialogue.id == ids["a"]))
    assert set(_rows(store)) == {ids["b"]}


def test_an_endpoint_that_fails_every_call_leaves_an_error_on_every_dialogue(store, db_url, capsys):
    ids = store_judged_dialogues(store, {"a": WARM_REPLIES, "b": COLD_REPLIES}, eval_run=False)
    with start_server(models=["another-model"]) as server:
        code, out = _judge(capsys, server, "--dialogues", *map(str, ids.values()), "--db", db_url)
    assert code == 1 and out["ok"] == 0 and out["errors"] == {"backend": 2}
    rows = _rows(store)
    assert all("does not know model 'scripted'" in rows[i].error for i in ids.values())


@pytest.mark.parametrize("args, message", [
    ([], "name one set of dialogues"),
    (["--eval-run", "1", "--collection", "x"], "got --eval-run, --collection"),
    (["--dialogues", "999"], "--dialogues: no finished dialogue with id 999"),
    (["--collection", "x", "--step", "2"], "--step: only with --job"),
    (["--collection", "x", "--prompt-version", "v9"], "judge prompt version 'v9' not found"),
])
def test_bad_input_names_the_option(store, db_url, capsys, args, message):
    code = main(["judge", *args, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--db", db_url])
    assert code == 2 and message in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the radar
def test_benchmark_view_radar_shows_the_run_means_per_judge(store, db_url, capsys):
    from app.judge_panel import judge_view

    ids = store_judged_dialogues(store, {"warm": WARM_REPLIES, "cold": COLD_REPLIES, "bad": ["judge-mode:refusal ok"]})
    with session_scope(store) as s:
        run_id = s.get(Dialogue, ids["warm"]).eval_run_id
    assert judge_view(store, run_id) == ("", None)  # not judged yet: nothing shown
    with start_server() as server:
        _judge(capsys, server, "--eval-run", str(run_id), "--db", db_url)
    rows = _rows(store)
    text, fig = judge_view(store, run_id)
    assert "n 2" in text and "errors 1 (refusal 1)" in text
    (trace,) = fig.data
    assert trace.type == "scatterpolar" and list(trace.theta[:5]) == [
        "empathic depth", "core insight", "solution crafting", "dialogue guidance", "style adaptability"]
    expected = [(rows[ids["warm"]].scores[d] + rows[ids["cold"]].scores[d]) / 2 for d in DIMENSIONS]
    assert list(trace.r[:5]) == pytest.approx(expected)


@pytest.mark.process
@pytest.mark.browser
def test_radar_in_the_benchmark_view(lab_server, browser_page, capsys, screenshot):
    from concurrent.futures import ThreadPoolExecutor

    from trainer.benchmarking import eval_runs

    store, page = lab_server.store, browser_page
    ids = store_judged_dialogues(store, {"warm": WARM_REPLIES, "cold": COLD_REPLIES})
    with session_scope(store) as s:
        run_id = s.get(Dialogue, ids["warm"]).eval_run_id
    eval_runs.finish_eval_run(store, run_id, "succeeded")
    with start_server() as server, ThreadPoolExecutor(1) as pool:  # sync Playwright holds this thread's loop
        pool.submit(_judge, capsys, server, "--eval-run", str(run_id), "--db", lab_server.store_url).result()
    page.get_by_role("tab", name="Benchmark").click()
    row = page.locator("#bench-lab [role=gridcell]").filter(has_text="judged").first
    row.wait_for()
    row.click()
    page.locator("#bench-judge-summary").get_by_text("Social-cognition judge", exact=False).wait_for()
    page.locator("#bench-judge .js-plotly-plot .polarlayer").wait_for()
    page.locator("#bench-judge").scroll_into_view_if_needed()
    screenshot(page, "benchmark-judge.png", full_page=False)
    assert page.dialogs == []
