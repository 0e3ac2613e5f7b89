"""Benchmark view helpers against a real store: eval runs scored by trainer.benchmarking.benchmark, grouped by fingerprint."""
from __future__ import annotations

import pytest
from helpers import off_loop, wait_for

from app.render import breakdown_tables
from app.views import benchmark as benchmark_view
from simulator.evaluation.published import PUBLISHED
from simulator.llm.hashing import fingerprint_hash
from storage import EvalRun, session_scope
from storage.dialogues import add_turn, finish_dialogue, start_dialogue
from trainer.benchmarking import eval_runs

OFFLINE = {"backend": "offline", "model": "minilm-prototypes", "endpoint": "", "prompt_version": "v1",
           "rules": {"name": "standard", "start": 40.0}}
REMOTE = {"backend": "openai", "model": "deepseek-v3", "endpoint": "127.0.0.1:8000", "prompt_version": "v1",
          "rules": {"name": "standard", "start": 40.0}}
PERSONAS = [("p1", "Ana", "just_listen", "negative"), ("p2", "Ben", "just_listen", "passive"),
            ("p3", "Chen", "useful_advice", "negative")]


def _eval_run(store, name, fp, finals, errors=()):
    """An eval run with one dialogue per persona (final emotion, or an error for the ids in `errors`)."""
    with session_scope(store) as s:
        run = EvalRun(name=name, model_ref=f"/models/{name}", simulator_fingerprint=fp,
                      fingerprint_hash=fingerprint_hash(fp), profile_set_hash="builtin-3", seed=7)
        s.add(run)
        s.flush()
        run_id = run.id
    ids = []
    for (pid, pname, need, pers), final in zip(PERSONAS, finals):
        d = start_dialogue(store, eval_run_id=run_id, persona_id=pid, source="benchmark",
                           persona_snapshot={"name": pname, "need_category": need, "personality": pers})
        if pid in errors:
            finish_dialogue(store, d, "failed", None, outcome="error", error="simulator: HTTP 503")
        else:
            finish_dialogue(store, d, "finished", final, outcome="success" if final >= 100 else "max_turns")
        ids.append(d)
    eval_runs.finish_eval_run(store, run_id, "succeeded")
    return run_id, ids


def test_leaderboard_ranks_within_each_fingerprint_only(store):
    weak, _ = _eval_run(store, "weak", OFFLINE, [20, 40, 30])
    strong, _ = _eval_run(store, "strong", OFFLINE, [100, 80, 60])
    remote, _ = _eval_run(store, "remote", REMOTE, [10, 10, 10])
    groups = eval_runs.leaderboard(store)
    rows = benchmark_view.lab_rows(groups)
    by_run = {r[2]: r for r in rows}
    assert benchmark_view.simulator_label(OFFLINE, fingerprint_hash(OFFLINE)).startswith(
        "offline:minilm-prototypes · rules standard · fp ")  # a native backend uses no prompts
    assert benchmark_view.simulator_label(REMOTE).endswith("rules standard · prompts v1")
    sage = dict(REMOTE, prompt_pack={"pack": "sage", "files_sha256": {}})
    assert benchmark_view.simulator_label(sage).endswith("rules standard · prompts sage")
    offline_label = benchmark_view.simulator_short(OFFLINE, fingerprint_hash(OFFLINE))
    assert offline_label == f"offline:minilm-prototypes · fp {fingerprint_hash(OFFLINE)[:8]}"
    assert by_run[strong][:5] == [offline_label, 1, strong, "strong", "80.0"]
    assert by_run[weak][:2] == [offline_label, 2]
    assert by_run[remote][0].startswith("openai:deepseek-v3 @ 127.0.0.1:8000")
    assert by_run[remote][1] == 1  # first in its own group, not third overall
    # rows of one group are contiguous: a ranking never interleaves fingerprints
    labels = [r[0] for r in rows]
    assert labels == sorted(labels, key=labels.index)
    published = benchmark_view.published_table(groups)
    assert len(published) == len(PUBLISHED)
    assert published[0][1] == "GPT-4o-latest (published)" and published[0][6] == "DeepSeek-V3 (published)"
    fig = benchmark_view.leaderboard_figure(groups)
    assert len(fig.data) == 3  # two lab groups and the published one, each its own panel
    panel = {t.name: t for t in fig.data}
    offline_bars = panel[benchmark_view.simulator_label(OFFLINE, fingerprint_hash(OFFLINE))]
    assert list(offline_bars.y) == [f"#{weak} weak", f"#{strong} strong"]  # best drawn at the top
    assert list(offline_bars.x) == [30.0, 80.0]
    assert fig.data[-1].marker.pattern.shape == "/"  # published bars are hatched


def test_breakdown_and_dialogues_count_errors(store):
    run_id, ids = _eval_run(store, "mixed", OFFLINE, [100, 50, 0], errors=("p3",))
    need, personality = breakdown_tables(eval_runs.breakdown(store, run_id))
    assert [r[0] for r in need] == ["Just listen to the venting", "Give genuinely useful advice"]
    listen = need[0]
    assert listen[1:6] == ["75.0", 1, 0, 2, 0]
    advice = need[1]
    assert advice[1:6] == ["0.0", 0, 1, 1, 1]  # the failed dialogue stays in n, counted as an error
    assert [r[0] for r in personality] == ["Negative", "Passive"]
    rows = benchmark_view.dialogue_rows(eval_runs.eval_run_dialogues(store, run_id))
    assert [r[0] for r in rows] == ids
    assert rows[2][4:] == ["—", "error", 0, "simulator: HTTP 503"]
    title = benchmark_view.run_title(eval_runs.get_eval_run(store, run_id))
    assert f"Eval run #{run_id}" in title and "errors 1" in title


def test_empty_leaderboard_shows_only_published(store):
    groups = eval_runs.leaderboard(store)
    assert benchmark_view.lab_rows(groups) == []
    assert len(benchmark_view.published_table(groups)) == len(PUBLISHED)
    figure = benchmark_view.leaderboard_figure(eval_runs.leaderboard(store, include_published=False))
    assert figure.layout.annotations[0].text == "no finished eval runs yet"



@pytest.mark.process
@pytest.mark.browser
def test_leaderboard_in_browser(lab_server, browser_page, grid_rows, screenshot):
    store, page = lab_server.store, browser_page
    _eval_run(store, "weak", OFFLINE, [20, 40, 30])
    strong, ids = _eval_run(store, "strong", OFFLINE, [100, 80, 60])
    _eval_run(store, "remote", REMOTE, [10, 10, 10])
    page.get_by_role("tab", name="Benchmark").click()
    lab = page.locator("#bench-lab")
    lab.get_by_text("strong", exact=True).wait_for()
    rows = grid_rows(page, "bench-lab")
    ranked = [(r[0].split(" · ")[0], r[1], r[3]) for r in rows]
    assert ranked == [("openai:deepseek-v3 @ 127.0.0.1:8000", "1", "remote"),
                      ("offline:minilm-prototypes", "1", "strong"), ("offline:minilm-prototypes", "2", "weak")]
    published = page.locator("#bench-published")
    published.get_by_text("GPT-4o-latest (published)").wait_for()
    pub_rows = grid_rows(page, "bench-published")
    assert len(pub_rows) == len(PUBLISHED) and {r[6] for r in pub_rows} == {"DeepSeek-V3 (published)"}
    lab.locator("[role=gridcell]").filter(has_text="strong").first.click()
    page.locator("#bench-need").get_by_text("Just listen to the venting").wait_for()
    page.locator("#bench-run").get_by_text(f"Eval run #{strong}", exact=False).wait_for()
    page.locator("#bench-chart .js-plotly-plot").wait_for()
    screenshot(page, "leaderboard.png")
    page.locator("#bench-dialogues [role=gridcell]").filter(has_text="Chen").first.click()
    page.get_by_role("tab", name="Transcripts", selected=True).wait_for()
    assert page.dialogs == []


def test_protocol_and_replay_are_shown_with_each_run(store, shared_data):
    from trainer.benchmarking import benchmark, protocol

    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    cfg = benchmark.BenchmarkConfig(policy=f"replay:{f}", simulator=f"replay:{f}", profiles=str(f), limit=4)
    run_id = off_loop(lambda: benchmark.run_benchmark(store, cfg, log=lambda _m: None)).eval_run_id
    _eval_run(store, "old", OFFLINE, [20, 40, 30])  # recorded before protocols were versioned
    rows = {r[2]: r for r in benchmark_view.lab_rows(eval_runs.leaderboard(store))}
    proto = eval_runs.get_eval_run(store, run_id)["protocol"]
    assert rows[run_id][3].endswith("(replay)") and rows[run_id][-1] == benchmark_view.protocol_label(proto)
    assert rows[run_id][-1].startswith(protocol.PROTOCOL_VERSION) and "unversioned" in [r[-1] for r in rows.values()]
    title = benchmark_view.run_title(eval_runs.get_eval_run(store, run_id), eval_runs.truncations(store, run_id))
    assert "10 policy replies (the last not judged)" in title and "caps per reply none" in title
    assert "replies cut 0" in title and proto["policy_system_prompt_sha256"]["zh"] in title


@pytest.mark.process
@pytest.mark.browser
def test_replay_run_in_browser_shows_its_protocol(lab_server, browser_page, grid_rows, shared_data):
    from trainer.benchmarking import benchmark, protocol

    f = shared_data / "sage" / "qwen2.5-72b_result.jsonl"
    cfg = benchmark.BenchmarkConfig(policy=f"replay:{f}", simulator=f"replay:{f}", profiles=str(f), limit=3)
    run_id = off_loop(lambda: benchmark.run_benchmark(lab_server.store, cfg, log=lambda _m: None)).eval_run_id
    page = browser_page
    page.get_by_role("tab", name="Benchmark").click()
    lab = page.locator("#bench-lab")
    rows = wait_for(lambda: [r for r in grid_rows(page, "bench-lab") if r[3].endswith("(replay)")], timeout=180)
    assert rows[0][2] == str(run_id) and rows[0][-1].startswith(protocol.PROTOCOL_VERSION)
    lab.locator("[role=gridcell]").filter(has_text=f"{f.name} (replay)").first.click()
    page.locator("#bench-run").get_by_text(f"Eval run #{run_id}", exact=False).wait_for()
    page.locator("#bench-run").get_by_text("the last not judged", exact=False).wait_for()


def _with_changes(store, dialogue_ids, deltas):
    """Give each dialogue an opening and one judged user turn per delta."""
    for d, ds in zip(dialogue_ids, deltas):
        add_turn(store, d, 0, "user", "hello", emotion=40.0, delta=0.0)
        for i, delta in enumerate(ds):
            add_turn(store, d, 2 * i + 1, "assistant", "reply")
            add_turn(store, d, 2 * i + 2, "user", "more", emotion=40.0 + delta, delta=float(delta))


def test_fidelity_of_an_eval_run(store):
    run_id, ids = _eval_run(store, "judged", OFFLINE, [50, 60, 70])
    _with_changes(store, ids, [[5, 10], [-5, 3], [5]])
    summary, fig = benchmark_view.fidelity_view(store, run_id)
    assert summary.startswith("**Fidelity** · 5 judged changes in 3 dialogue(s) · distance (TV) ")
    lab, published = fig.data
    assert list(lab.x) == ["-10", "-5", "0", "+2", "+3", "+5", "+10"]  # every value of either histogram
    assert list(lab.y) == pytest.approx([0, 0.2, 0, 0, 0.2, 0.4, 0.2])
    assert list(published.y) == pytest.approx([1041 / 7936, 2700 / 7936, 5 / 7936, 1 / 7936, 0, 2928 / 7936,
                                               1261 / 7936])
    assert "TV" in fig.layout.title.text and published.marker.pattern.shape == "/"
    assert benchmark_view.fidelity_view(store, None) == ("", None)
    assert "does not exist" in benchmark_view.fidelity_view(store, 999_999)[0]


@pytest.mark.process
@pytest.mark.browser
def test_fidelity_chart_in_browser(lab_server, browser_page):
    store, page = lab_server.store, browser_page
    _, ids = _eval_run(store, "fidelity-run", REMOTE, [45, 50, 40])
    _with_changes(store, ids, [[5, 5], [10], [-5]])
    page.get_by_role("tab", name="Benchmark").click()
    lab = page.locator("#bench-lab")
    row = lab.locator("[role=gridcell]").filter(has_text="fidelity-run").first
    row.wait_for()
    row.click()
    page.locator("#bench-fidelity-summary").get_by_text("4 judged changes in 3 dialogue(s)", exact=False).wait_for()
    page.locator("#bench-fidelity .js-plotly-plot").wait_for()
    assert page.locator("#bench-fidelity .barlayer .trace").count() == 2  # lab and published bars


@pytest.mark.browser
def test_views_poll_only_while_their_tab_is_open(lab_server, browser_page, monkeypatch):
    """The Training and Benchmark views re-read the job list on a timer; on another tab (the page opens on
    Live rollout, which has none) nothing is read, opening Benchmark starts its reads, leaving it stops them."""
    import time

    from playwright.sync_api import expect

    from app.context import IDLE_POLL_S
    from trainer.jobs import queue as job_queue

    reads: list[float] = []
    list_jobs = job_queue.list_jobs
    monkeypatch.setattr(job_queue, "list_jobs", lambda *a, **kw: reads.append(time.monotonic()) or list_jobs(*a, **kw))
    page = browser_page
    quiet_s = IDLE_POLL_S + 2.0  # longer than any view's timer period (2-3 s live, IDLE_POLL_S idle)

    def reads_over_quiet_period() -> int:
        time.sleep(5.0)  # a read sent before the switch may still be on its way on a busy machine
        before = len(reads)
        time.sleep(quiet_s)
        return len(reads) - before

    page.reload()
    page.wait_for_selector(".gradio-container", state="attached")
    expect(page.get_by_role("tab", name="Live rollout")).to_have_attribute("aria-selected", "true")
    assert reads_over_quiet_period() == 0
    before = len(reads)
    page.get_by_role("tab", name="Benchmark").click()
    wait_for(lambda: len(reads) >= before + 3, timeout=90)  # the tab's own read, then its timer's
    page.get_by_role("tab", name="Live rollout").click()
    assert reads_over_quiet_period() == 0


@pytest.mark.browser
def test_an_idle_page_stops_asking_for_animation_frames(browser_page):
    """Gradio's status trackers leave a 60-frames-a-second loop running (app.page_script): the script the lab
    puts first in the page paces it, so once a page open on a view with nothing live has settled (its first
    plots and transitions drawn) it asks for almost no frames."""
    import time

    from playwright.sync_api import expect

    from benchmarks.page_cpu import COUNT_FRAMES

    page = browser_page
    page.context.add_init_script(COUNT_FRAMES)  # counts the page's requests, under everything the page installs
    page.reload()
    page.wait_for_selector(".gradio-container", state="attached")
    expect(page.get_by_role("tab", name="Live rollout")).to_have_attribute("aria-selected", "true")

    def frames_in(seconds: float) -> int:
        before = page.evaluate("() => window.frames_asked")
        time.sleep(seconds)
        return page.evaluate("() => window.frames_asked") - before

    # without the pacing a leaked loop asks for 120 frames in every 2 s, forever
    wait_for(lambda: frames_in(2.0) < 20, timeout=90)


@pytest.mark.process
@pytest.mark.browser
@pytest.mark.model
def test_the_quick_look_on_the_default_policy_ends_in_the_browser(lab_server, browser_page):
    """Quick look fills the form with one persona and 16-token replies and says what to expect before Start;
    the job on the default policy ends with its one dialogue."""
    from playwright.sync_api import expect

    from app.services.benchmark_form import eval_run_of_job
    from trainer.jobs import queue as job_queue

    store, page = lab_server.store, browser_page
    page.get_by_role("tab", name="Benchmark").click()
    expect(page.locator("#bench-expected")).to_contain_text("8 dialogues × 10 replies × 4096 tokens")
    page.locator("#bench-quick input").check()
    expect(page.locator("#bench-limit input")).to_have_value("1")
    expect(page.locator("#bench-max-new-tokens input")).to_have_value("16")
    expect(page.locator("#bench-expected")).to_contain_text("1 dialogue × 10 replies × 16 tokens")
    page.locator("#bench-start").click()
    expect(page.locator("#bench-msg")).to_contain_text("Benchmark job #")
    job_id = job_queue.list_jobs(store, kind="benchmark")[0]["id"]
    detail = wait_for(lambda: (d := job_queue.job_detail(store, job_id)) and d["status"] not in
                      ("queued", "running") and d, timeout=600, every=1.0)
    assert detail["status"] == "succeeded", detail["log_tail"][-2000:]
    expect(page.locator("#bench-job-detail")).to_contain_text("1/1 dialogues", timeout=60_000)
    run = eval_runs.get_eval_run(store, eval_run_of_job(store, job_id))
    assert (run["name"], run["config"]["limit"], run["config"]["max_new_tokens"]) == ("quick look", 1, 16)
    assert page.dialogs == []


def test_equal_scores_share_a_rank_and_a_comparisons_sides_stay_off_the_board(store):
    from storage import Comparison

    first, _ = _eval_run(store, "first", OFFLINE, [40, 40, 40])
    second, _ = _eval_run(store, "second", OFFLINE, [40, 40, 40])
    third, _ = _eval_run(store, "third", OFFLINE, [10, 10, 10])
    side_a, _ = _eval_run(store, "compare A seed 0", OFFLINE, [90, 90, 90])
    with session_scope(store) as s:
        s.add(Comparison(name="c", eval_runs={"a": [side_a], "b": []}, status="succeeded"))
    rows = benchmark_view.lab_rows(eval_runs.leaderboard(store, include_published=False))
    assert [(r[2], r[1]) for r in rows] == [(first, 1), (second, 1), (third, 3)]
    assert eval_runs.shared_ranks([{"score": 8.0}] * 4) == [1, 1, 1, 1]
