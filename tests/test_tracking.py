"""Experiment tracking: a tiny training job writes TensorBoard event files (read back with TensorBoard's own
reader) and the same scalars into Trackio's local store; a tracker whose package is missing is refused at
config validation, naming the field and the package."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import tiny_train_config
from sqlalchemy import select

from storage import Job, Metric, make_store, read_scope
from trainer.config import TrainConfig
from trainer.learning.tracking import report_to_error

REPO = Path(__file__).resolve().parent.parent


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, RLVER_LAB_HOME=str(tmp_path / "home"), HF_HUB_OFFLINE="1", **env)
    return subprocess.run([sys.executable, *args], cwd=REPO, env=full_env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.process
def test_training_job_writes_tensorboard_events_and_trackio_logs(tiny_model_dir: Path, tmp_path: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    db_url = f"sqlite:///{tmp_path / 'lab.db'}"
    config = tiny_train_config(tmp_path, tiny_model_dir, report_to=["tensorboard", "trackio"])
    trackio_dir = tmp_path / "trackio"
    proc = _cli(tmp_path, "-m", "trainer", "train", "--config", str(config), "--db", db_url, "--json",
                TRACKIO_DIR=str(trackio_dir), TRACKIO_PROJECT="tracking-test")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = json.loads(proc.stdout.strip().splitlines()[-1])["job_id"]

    store = make_store(db_url)
    with read_scope(store) as s:
        output_dir = Path(s.get(Job, job_id).output_dir)
        stored = {(m.name, m.step): m.value for m in s.scalars(select(Metric).where(Metric.job_id == job_id))}
    store.dispose()
    names = {name for name, _ in stored}
    assert {"reward_mean", "final_emotion_mean", "policy_loss", "approx_kl", "entropy"} <= names

    events = EventAccumulator(str(output_dir / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    assert set(events.Tags()["scalars"]) == names  # every metric the step logs, under its own name
    for name in names:
        points = events.Scalars(name)
        assert [p.step for p in points] == [1, 2], name
        for p in points:
            assert p.value == pytest.approx(stored[(name, p.step)], rel=1e-6, abs=1e-6), name
    texts = events.Tensors("sample_dialogues/text_summary")  # add_text's tag as TensorBoard stores it
    assert [t.step for t in texts] == [1, 2]
    first = texts[0].tensor_proto.string_val[0].decode()
    assert "final emotion" in first and "- user (" in first and "- assistant:" in first

    read_back = ("import json; from trackio.sqlite_storage import SQLiteStorage as S; "
                 "print('LOGS', json.dumps(S.get_logs('tracking-test', 'job-%d')))" % job_id)
    out = _cli(tmp_path, "-c", read_back, TRACKIO_DIR=str(trackio_dir)).stdout
    logs = json.loads(next(line[5:] for line in out.splitlines() if line.startswith("LOGS ")))
    scalars = {(name, row["step"]): row[name] for row in logs for name in names if name in row}
    assert scalars.keys() == stored.keys()
    for key, value in scalars.items():
        assert value == pytest.approx(stored[key], rel=1e-6, abs=1e-6), key
    dialogue_rows = [row for row in logs if "sample_dialogues" in row]
    assert [row["step"] for row in dialogue_rows] == [1, 2]
    assert "final emotion" in dialogue_rows[0]["sample_dialogues"]["_value"]


@pytest.mark.process
@pytest.mark.parametrize("tracker", ["wandb", "mlflow"])
def test_a_tracker_whose_package_is_missing_is_refused_before_training(tmp_path: Path, tracker: str):
    if importlib.util.find_spec(tracker) is not None:
        pytest.skip(f"{tracker} is installed here")
    problem = TrainConfig(report_to=["tensorboard", tracker]).errors(check_paths=False)["report_to"]
    assert f"the {tracker} package, which is not installed" in problem and f"pip install {tracker}" in problem
    config = tiny_train_config(tmp_path, tmp_path / "no-model", report_to=[tracker])
    proc = _cli(tmp_path, "-m", "trainer", "train", "--config", str(config), "--db",
                f"sqlite:///{tmp_path / 'lab.db'}")
    assert proc.returncode == 2
    assert "report_to:" in proc.stderr and f"pip install {tracker}" in proc.stderr
    assert not (tmp_path / "home" / "jobs").exists()  # refused before any job was created


@pytest.mark.parametrize("value, expected", [
    (["tensorboard"], ""),
    (["none"], ""),
    (["tensorboard", "trackio"], ""),
    ([], "must be a non-empty list"),
    ("tensorboard", "must be a non-empty list"),
    (["comet"], "unknown tracker(s) 'comet'"),
    (["none", "tensorboard"], "'none' turns tracking off"),
])
def test_report_to_values(value, expected):
    problem = report_to_error(value)
    assert (expected in problem) if expected else problem == ""


def test_report_to_of_the_wrong_type_in_yaml_names_the_field():
    from trainer.config import ConfigError

    with pytest.raises(ConfigError) as err:
        TrainConfig.from_dict({"report_to": "wandb"})
    assert "report_to" in err.value.errors


def test_a_resumed_run_replaces_the_steps_after_its_checkpoint(tmp_path: Path):
    """A run killed after step 3 whose last checkpoint is step 1 trains steps 2-3 again: TensorBoard shows
    the new values, once each."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from trainer.learning.tracking import make_tracking
    from trainer.rollout.types import RolloutSample

    sample = RolloutSample(key="k", dialogue_id=1, profile_id="maya", group_id="g", final_emotion=55.0,
                           emotions=[40.0, 55.0], outcome="max_turns", status="finished",
                           messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                                     {"role": "user", "content": "ok"}])
    first = make_tracking(["tensorboard"], tmp_path, "run", {})
    for step in (1, 2, 3):
        first.log_step(step, {"reward_mean": float(step)}, [sample], [0.55])
    first.close()
    # the killed run's file made in this very second with a name that sorts late (TensorBoard reads a folder's
    # files in name order, and a pid or counter compares as text: in a long suite the resume's counter reached
    # 10 after the first run's 9 and sorted before it, so the purge missed the steps it replaces)
    (made,) = (tmp_path / "tensorboard").glob("events.out.tfevents.*")
    parts = made.name.split(".")
    made.rename(made.with_name(".".join([*parts[:3], f"{int(time.time()):010d}", *parts[4:-2], "99999999", "9"])))
    resumed = make_tracking(["tensorboard"], tmp_path, "run", {}, start_step=1)
    for step in (2, 3):
        resumed.log_step(step, {"reward_mean": 10.0 * step}, [sample])
    resumed.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    assert [(p.step, p.value) for p in events.Scalars("reward_mean")] == [(1, 1.0), (2, 20.0), (3, 30.0)]
    text = events.Tensors("sample_dialogues/text_summary")[0].tensor_proto.string_val[0].decode()
    assert text == ("**maya** · final emotion 55 · reward 0.550 · max_turns\n- user (40): hi\n- assistant: hello\n"
                    "- user (55): ok")


def test_wandb_runs_offline_without_a_key_when_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Only where wandb is installed (it is not in requirements.txt): no WANDB_MODE and no key means an
    offline run in the job folder, with each step's dialogues as a table."""
    pytest.importorskip("wandb")
    from trainer.learning.tracking import make_tracking
    from trainer.rollout.types import RolloutSample

    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    sample = RolloutSample(key="k", dialogue_id=1, profile_id="maya", group_id="g", final_emotion=55.0,
                           messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
    tracking = make_tracking(["wandb"], tmp_path, "job-1", {"report_to": ["wandb"]})
    assert tracking.trackers[0].run.settings.mode == "offline"
    for step in (1, 2):
        tracking.log_step(step, {"reward_mean": 0.1 * step}, [sample])
    assert [t.name for t in tracking.trackers] == ["wandb"]  # nothing failed
    tracking.close()
    tables = sorted(tmp_path.glob("wandb/offline-run-*/files/media/table/sample_dialogues_*.table.json"))
    assert len(tables) == 2 and "**maya**" in json.loads(tables[0].read_text())["data"][0][0]
