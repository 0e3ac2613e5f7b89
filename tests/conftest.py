"""Shared fixtures. Everything is offline: no hub downloads, no analytics, no outside connections."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """RLVER_SHARED_DATA, default ../shared/data beside the checkout."""
    return Path(os.environ.get("RLVER_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "sage").is_dir() or not (path / "rlver").is_dir():
        pytest.skip(f"RLVER/SAGE data not found under {path} (set RLVER_SHARED_DATA)")
    return path


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """A fresh real SQLite file per test."""
    return f"sqlite:///{tmp_path / 'lab.db'}"


@pytest.fixture
def engine(db_url: str):
    from storage import make_engine

    eng = make_engine(db_url)
    yield eng
    eng.dispose()


@pytest.fixture(autouse=True)
def _lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep logs/checkpoints of each test in its own folder, never in the checkout."""
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "lab_home"))
    monkeypatch.delenv("RLVER_LAB_DB", raising=False)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~100K-parameter Qwen2 model with a byte-level BPE chat tokenizer, built offline."""
    from trainer.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))
