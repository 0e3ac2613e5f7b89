"""Runs view helpers against a real SQLite store filled with Job, Metric and Dialogue rows."""
from __future__ import annotations

import pytest

from app.services import runs
from storage import Job, Metric, session_scope
from storage.dialogues import finish_dialogue, start_dialogue


def _job(store, name, config, rewards):
    with session_scope(store) as s:
        job = Job(kind="train", name=name, config=config, status="succeeded")
        s.add(job)
        s.flush()
        for step, r in enumerate(rewards):
            s.add(Metric(job_id=job.id, step=step, name="reward/mean", value=r))
            s.add(Metric(job_id=job.id, step=step, name="entropy", value=1.0 - r))
        return job.id


def test_metric_series_and_overlay(store):
    a = _job(store, "ppo-run", {"algorithm": "ppo", "learning_rate": 1e-6}, [0.1, 0.2, 0.4])
    b = _job(store, "grpo-run", {"algorithm": "grpo", "learning_rate": 1e-6}, [0.3, 0.5])
    assert runs.metric_names(store, [a, b]) == ["reward/mean", "entropy"]
    series = runs.metric_series(store, [a, b], "reward/mean")
    assert series[a] == [(0, 0.1), (1, 0.2), (2, 0.4)]
    assert series[b] == [(0, 0.3), (1, 0.5)]
    fig = runs.compare_figure(store, [a, b], "reward/mean", marker_step=1)
    assert [t.name for t in fig.data] == [f"#{a} ppo-run (ppo)", f"#{b} grpo-run (grpo)"]
    assert list(fig.data[0].y) == [0.1, 0.2, 0.4]
    assert fig.layout.shapes[0].x0 == 1  # the picked step is marked
    empty = runs.compare_figure(store, [a], "no-such-metric")
    assert empty.layout.annotations[0].text == "no data yet"


def test_config_diff_shows_only_differences_and_missing_keys():
    headers, rows = runs.config_diff({
        "#1": {"algorithm": "ppo", "lr": 1e-6, "lora": {"r": 16, "alpha": 32}, "seed": 1},
        "#2": {"algorithm": "grpo", "lr": 1e-6, "lora": {"r": 8, "alpha": 32}},
    })
    assert headers == ["setting", "#1", "#2"]
    assert rows == [["algorithm", "ppo", "grpo"], ["lora.r", "16", "8"], ["seed", "1", "—"]]
    _, all_rows = runs.config_diff({"#1": {"a": 1}, "#2": {"a": 1}}, only_different=False)
    assert all_rows == [["a", "1", "1"]]


def test_job_configs_in_given_order(store):
    a = _job(store, "x", {"algorithm": "ppo"}, [0.1])
    b = _job(store, "y", {"algorithm": "rloo"}, [0.1])
    cfgs = runs.job_configs(store, [b, a])
    assert list(cfgs.values()) == [{"algorithm": "rloo"}, {"algorithm": "ppo"}]


def test_step_groups_side_by_side(store):
    job = _job(store, "grpo", {"algorithm": "grpo"}, [0.5, 0.6])
    ids = {}
    for step in (0, 1):
        for g in ("g0", "g1"):
            for k, emo in enumerate((20.0, 60.0)):
                d = start_dialogue(store, job_id=job, step=step, group_id=f"{step}-{g}", persona_id=f"p-{g}",
                                   persona_snapshot={"name": f"Ana {g}"}, source="train")
                finish_dialogue(store, d, "finished", emo + step, outcome="max_turns")
                ids[(step, g, k)] = d
    assert runs.dialogue_steps(store, job) == [0, 1]
    headers, rows = runs.step_groups(store, job, 1)
    assert headers == ["group", "mean", "rollout 1", "rollout 2"]
    assert [r[0] for r in rows] == ["1-g0", "1-g1"]
    assert rows[0][1] == "41.0"
    assert rows[0][2] == f"#{ids[(1, 'g0', 0)]} Ana g0 · 21 · max_turns"
    assert runs.dialogue_id_from_cell(rows[1][3]) == ids[(1, "g1", 1)]


def test_ungrouped_dialogues_get_own_rows(store):
    job = _job(store, "ppo", {"algorithm": "ppo"}, [0.5])
    d1 = start_dialogue(store, job_id=job, step=0, persona_id="p1")
    d2 = start_dialogue(store, job_id=job, step=0, persona_id="p2")
    finish_dialogue(store, d2, "failed", None, outcome="error", error="simulator down")
    headers, rows = runs.step_groups(store, job, 0)
    assert headers == ["group", "mean", "rollout 1"]
    assert rows == [[f"(dialogue {d1})", "—", f"#{d1} p1 · — · running"],
                    [f"(dialogue {d2})", "—", f"#{d2} p2 · — · error"]]


def test_parse_ids():
    assert runs.parse_job_ids(["#3 ppo", 4, "#3 again", "junk"]) == [3, 4]
    assert runs.dialogue_id_from_cell("") is None
    assert runs.dialogue_id_from_cell(17) == 17


@pytest.mark.process
@pytest.mark.browser
def test_compare_runs_and_open_a_group_dialogue(lab_server, browser_page, grid_rows, screenshot):
    store, page = lab_server.store, browser_page
    a = _job(store, "ppo-run", {"algorithm": "ppo", "actor_lr": 1e-6}, [0.1, 0.2, 0.4])
    b = _job(store, "grpo-run", {"algorithm": "grpo", "actor_lr": 1e-6}, [0.3, 0.5, 0.6])
    for g in ("g0", "g1"):
        for emo in (20.0, 60.0):
            d = start_dialogue(store, job_id=b, step=1, group_id=f"1-{g}", persona_id=f"p-{g}",
                               persona_snapshot={"name": f"Ana {g}"}, source="train")
            finish_dialogue(store, d, "finished", emo, outcome="max_turns")
    page.get_by_role("tab", name="Runs").click()
    page.locator("#runs-refresh").click()
    picker = page.locator("#runs-pick input")
    for label in (f"#{a} ppo-run (ppo)", f"#{b} grpo-run (grpo)"):
        picker.click()
        page.locator("#runs-pick").get_by_role("option", name=label).click()
    page.keyboard.press("Escape")
    page.wait_for_function("""() => { const p = document.querySelector('#runs-plot .js-plotly-plot');
        return p && p.data && p.data.length === 2; }""")
    names = page.evaluate("() => document.querySelector('#runs-plot .js-plotly-plot').data.map(t => t.name)")
    assert names == [f"#{a} ppo-run (ppo)", f"#{b} grpo-run (grpo)"]
    page.locator("#runs-diff [role=gridcell]").filter(has_text="grpo").first.wait_for()
    assert grid_rows(page, "runs-diff") == [["algorithm", "ppo", "grpo"]]  # only what differs
    page.locator("#runs-step-job input").click()
    # Scoped to this dropdown: the run picker above lists the same label.
    page.locator("#runs-step-job").get_by_role("option", name=f"#{b} grpo-run (grpo)").click()
    page.locator("#runs-groups [role=gridcell]").filter(has_text="1-g1").first.wait_for()
    rows = grid_rows(page, "runs-groups")
    assert [r[:2] for r in rows] == [["1-g0", "40.0"], ["1-g1", "40.0"]] and len(rows[0]) == 4
    screenshot(page, "runs.png")
    page.locator("#runs-groups [role=gridcell]").filter(has_text="Ana g1 · 60").first.click()
    page.get_by_role("tab", name="Transcripts", selected=True).wait_for()
    assert page.dialogs == []
