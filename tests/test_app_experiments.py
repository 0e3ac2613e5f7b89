"""The Experiment section of the Training view and the Experiments view, in a real browser: a 2x2 tiny grid
launched from the page runs as real jobs and its cells' results fill the experiment page."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from helpers import fill, wait_for

from trainer.experiments import grid

pytestmark = pytest.mark.process

REPO = Path(__file__).resolve().parent.parent


def grid_text(model: Path, **changes) -> str:
    data = yaml.safe_load((REPO / "configs" / "experiment-tiny.yaml").read_text())
    data["base_config"] = "configs/tiny-test.yaml"  # a grid typed in the app reads paths from the project root
    data["base"]["model"] = str(model)
    data.update(changes)
    return yaml.safe_dump(data)


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.timeout(4800)  # 8 job processes one after another: longer than the suite's default limit
def test_launch_a_grid_from_training_and_watch_the_experiment_page_fill(lab_server, browser_page, tiny_model_dir,
                                                                        grid_rows, screenshot):
    page = browser_page
    page.get_by_role("tab", name="Training").click()
    # a click event straight on the accordion's label: the Training view's 2 s refresh keeps overlays coming
    page.locator("#train-experiment").get_by_text("Experiment: a grid of configs", exact=False).dispatch_event("click")
    page.locator("#exp-grid textarea").wait_for(state="visible")
    assert "name: cpu-algorithm-x-mode" in page.locator("#exp-grid textarea").input_value()  # the example
    fill(page, "exp-grid", grid_text(tiny_model_dir, grid={"algorithm": ["ppo", "adam"], "mode": ["direct"]}))
    page.locator("#exp-launch").click()
    page.locator("#exp-launch-msg").get_by_text("cell 2 (algorithm=adam, mode=direct): algorithm",
                                                exact=False).wait_for()
    assert grid.list_experiments(lab_server.store) == []  # nothing recorded from a bad grid

    fill(page, "exp-grid", grid_text(tiny_model_dir))
    page.locator("#exp-launch").click()
    page.locator("#exp-summary").get_by_text("tiny-algorithm-x-mode", exact=False).wait_for()  # the view opened
    experiment_id = grid.list_experiments(lab_server.store)[0]["id"]
    try:
        assert len(grid_rows(page, "exp-cells")) == 4
        # a generous limit: 8 job processes (4 trainings, 4 benchmarks) one after another on a busy machine
        rows = wait_for(lambda: len(grid_rows(page, "exp-results")) == 4 and grid_rows(page, "exp-results"),
                        timeout=3600, every=2.0)
        assert [r[0] for r in rows] == ["cell 1", "cell 2", "cell 3", "cell 4"]
        assert all(float(r[2]) >= 0 and r[8] == "1" for r in rows), rows  # a score over the one held-out persona
        page.locator("#exp-summary").get_by_text("succeeded", exact=False).wait_for()
        assert [r[2] for r in grid_rows(page, "exp-cells")] == ["succeeded"] * 4
        assert len(grid_rows(page, "exp-replies")) == 4 and len(grid_rows(page, "exp-need")) == 4
        screenshot(page, "experiments.png")
        # a cell's row opens its training job in the Training view
        page.locator("#exp-cells [role=gridcell]").first.click()
        page.locator("#train-summary").get_by_text("tiny-algorithm-x-mode", exact=False).wait_for()
    finally:
        grid.cancel_experiment(lab_server.store, experiment_id)
    assert page.dialogs == []


def test_the_grid_says_what_its_cells_take_before_launch(monkeypatch, tmp_path):
    """Each cell's steps at the time per step of a timed plan of its settings ('about'); a cell with none says so."""
    from app.services import experiments as experiments_service
    from app.services.plans import training_plan
    from storage.db import PROJECT_ROOT
    from trainer.config import TrainConfig
    from trainer.experiments import grid

    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "home"))
    text = experiments_service.example_grid()
    spec = grid.parse_grid(text, PROJECT_ROOT, check_paths=False)
    first = TrainConfig.from_dict({**spec.base, **spec.cells()[0]}).to_dict()
    training_plan.keep("cpu-demo", training_plan.plan_key(first, []), first["steps"],
                       {"fits": True, "per_gpu_gib": 1.0, "seconds_per_step": 60.0})
    preview = experiments_service.time_preview(text)
    assert preview.startswith(f"**{len(spec.cells())} training cell(s)**")
    assert f"- cell 1 ({grid.cell_label(spec.cells()[0])}): about " in preview.replace("\\_", "_")
    assert "- cell 2 " in preview and "not timed yet" in preview
    assert experiments_service.time_preview("grid: [") == ""
