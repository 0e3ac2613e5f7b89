"""Checkpoint files are read with torch's weights_only unpickler: a planted pickle cannot run code."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from trainer.checkpoint_layout import STATE_FILE
from trainer.learning.checkpoints import CheckpointError, load_checkpoint, rng_state, safe_load, set_rng_state


class _RunsCode:
    """Unpickling this calls os.system: what a hostile checkpoint would carry."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def _plant(path, marker) -> None:
    torch.save({"step": 3, "payload": _RunsCode(str(marker))}, path)


def test_a_trainer_state_that_would_run_code_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "step-000003"
    folder.mkdir()
    marker = tmp_path / "pwned"
    _plant(folder / STATE_FILE, marker)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(None, folder)  # refused before the learner is touched
    assert str(folder / STATE_FILE) in str(err.value)
    assert "could run code" in str(err.value) and "posix.system" in str(err.value)
    assert not marker.exists()


def test_a_value_head_that_would_run_code_is_refused(tmp_path, tiny_model_dir):
    import shutil

    from trainer.learning.learner import ValueModel

    critic = tmp_path / "critic"
    shutil.copytree(tiny_model_dir, critic)
    marker = tmp_path / "pwned"
    _plant(critic / "value_head.pt", marker)
    with pytest.raises(CheckpointError, match="value_head.pt"):
        ValueModel(critic)
    assert not marker.exists()


def test_a_saved_value_head_loads(tmp_path, tiny_model_dir):
    from trainer.learning.learner import ValueModel

    first = ValueModel(tiny_model_dir)
    with torch.no_grad():
        first.v_head.weight.fill_(0.25)
    first.save(tmp_path / "critic")
    again = ValueModel(tmp_path / "critic")
    assert torch.equal(again.v_head.weight, first.v_head.weight)


def _draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_rng_state_round_trips_through_safe_load(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    np.random.randn()  # leaves a cached gaussian in numpy's state
    torch.save(rng_state(), tmp_path / "rng.pt")
    expected = _draws()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    set_rng_state(safe_load(tmp_path / "rng.pt"))
    assert _draws() == expected


def test_rng_state_of_older_checkpoints_with_numpy_arrays_still_loads(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    old_form = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    torch.save(old_form, tmp_path / "rng.pt")
    expected = _draws()
    np.random.seed(9)
    set_rng_state(safe_load(tmp_path / "rng.pt"))
    assert _draws() == expected


@pytest.mark.process
def test_deepspeed_shards_are_checked_before_deepspeed_reads_them(tmp_path):
    """DeepSpeed unpickles its shards without restriction; the lab checks this rank's files first."""
    from trainer.learning.checkpoints import check_deepspeed_files

    state = tmp_path / "deepspeed" / "policy" / "state"
    state.mkdir(parents=True)
    torch.save({"module": {"w": torch.zeros(2)}, "ds_version": "0.19.8"}, state / "mp_rank_00_model_states.pt")
    torch.save({"optimizer_state_dict": {"step": 1}}, state / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    marker = tmp_path / "pwned"
    _plant(state / "zero_pp_rank_1_mp_rank_00_optim_states.pt", marker)
    check_deepspeed_files(tmp_path / "deepspeed", rank=0)  # rank 0 reads only its own shard and the model states
    with pytest.raises(CheckpointError, match="zero_pp_rank_1_mp_rank_00_optim_states.pt"):
        check_deepspeed_files(tmp_path / "deepspeed", rank=1)
    assert not marker.exists()
