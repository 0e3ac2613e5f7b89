"""The layout of a training checkpoint folder, in one torch-free module that the trainer (which writes it),
the job queue (which resumes from it) and the policy reader (which loads its model) all read.

    ROOT/step-000012/           one checkpoint per saved step
        policy/                 the trained model, a Hugging Face folder (LoRA merged)
        ...                     optimizer, value head, data order
        trainer_state.pt        written last: a folder without it is incomplete (a kill mid-write)
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

STATE_FILE = "trainer_state.pt"
POLICY_DIR = "policy"
STEP_PREFIX = "step-"


def checkpoint_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"{STEP_PREFIX}{step:06d}"


def checkpoint_step(path: str | Path) -> Optional[int]:
    """The step a checkpoint folder holds (None when the name is not a checkpoint's)."""
    name = Path(path).name
    return int(name[len(STEP_PREFIX):]) if name.startswith(STEP_PREFIX) and name[len(STEP_PREFIX):].isdigit() else None


def is_complete(path: str | Path) -> bool:
    return (Path(path) / STATE_FILE).exists()


def list_checkpoints(root: str | Path) -> list[Path]:
    """Complete checkpoints under root, oldest first (temporary and half-written folders are never listed)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and checkpoint_step(p) is not None and is_complete(p))


def policy_path(checkpoint_path: Optional[str]) -> Optional[str]:
    """Where the model of a checkpoint folder is (None without a checkpoint): what `--policy` and
    `model:` take to use the trained policy."""
    return str(Path(checkpoint_path) / POLICY_DIR) if checkpoint_path else None


def model_folder(path: str | Path) -> Path:
    """A checkpoint folder stands for the model in its policy/; any other folder for itself."""
    path = Path(path)
    if not (path / "config.json").exists() and (path / POLICY_DIR / "config.json").exists():
        return path / POLICY_DIR
    return path
