"""Checkpoints: Hugging Face folders plus everything needed to resume exactly, written atomically.

Layout of `OUTPUT/checkpoints/step-000010/`:
    policy/             save_pretrained model (LoRA merged) + tokenizer with its chat template
    policy_adapter/     the LoRA adapter (peft format), when LoRA is on
    critic/             PPO critic: backbone (save_pretrained) + value_head.pt
    trainer_state.pt    step, optimizer and scheduler states, RNG states, config, last metrics
    deepspeed/          DeepSpeed engine checkpoints (sharded optimizer state), when DeepSpeed is on
    rng_rank{R}.pt      RNG state of every other rank

Everything the lab reads back from a checkpoint goes through `safe_load` (torch's weights_only unpickler):
tensors and plain Python data only, so a checkpoint folder from elsewhere cannot run code here.

Writes go to a hidden `.step-000010.tmp` folder that is renamed into place only when complete, so a
crash, a full disk or a Cancel during the write leaves the previous checkpoint as the newest one. Old
checkpoints are pruned (`prune_checkpoints`) only after the new one is recorded in the store, so a kill
at any moment leaves a complete checkpoint to resume from.
"""
from __future__ import annotations

import os
import pickle
import random
import re
import shutil
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

from trainer.checkpoint_layout import STATE_FILE, checkpoint_dir, list_checkpoints
from trainer.learning.distributed import barrier, world


class CheckpointError(RuntimeError):
    """A checkpoint could not be written or read; the message says why."""


# What the lab's own older checkpoints hold besides tensors and plain data: numpy's RNG state as an array.
# Data-only reconstructors; nothing on this list runs code of the file's choosing.
_NUMPY_ARRAY_GLOBALS = [np._core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]


def _deepspeed_globals() -> list[Any]:
    """The data classes DeepSpeed's optimizer shards hold (loss scaler, ZeRO stage, fragment addresses)."""
    from deepspeed.runtime.fp16.loss_scaler import LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    return [LossScaler, ZeroStageEnum, fragment_address]


def safe_load(path: Path, allow: Sequence[Any] = ()) -> Any:
    """torch.load restricted to tensors and plain data (weights_only=True, plus numpy arrays that older
    checkpoints of the lab hold, plus `allow`). A file that needs anything else is refused, naming the file."""
    try:
        with torch.serialization.safe_globals([*_NUMPY_ARRAY_GLOBALS, *allow]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f"it names {found.group(1)}" if found else type(exc).__name__
        raise CheckpointError(f"{path} was refused: it holds more than tensors and plain data, and loading it "
                              f"could run code ({what}). The lab loads only what it writes itself.") from None


def check_deepspeed_files(folder: Path, rank: int) -> None:
    """DeepSpeed reads its own shards with an unrestricted unpickler: check this rank's files first."""
    allow = _deepspeed_globals()
    for f in sorted(Path(folder).rglob("*.pt")):
        if not f.name.startswith("zero_pp_rank_") or f.name.startswith(f"zero_pp_rank_{rank}_"):
            safe_load(f, allow)


def rng_state() -> dict[str, Any]:
    """Every RNG's state in plain types and tensors, so safe_load can read it back."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": random.getstate(), "torch": torch.get_rng_state(),
             "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    if isinstance(numpy_state, dict):
        numpy_state = (numpy_state["name"], numpy_state["keys"].numpy().astype(np.uint32), numpy_state["pos"],
                       numpy_state["has_gauss"], numpy_state["cached_gaussian"])
    np.random.set_state(numpy_state)  # a tuple with an array: checkpoints written before the dict form
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def clean_partial(root: Path) -> None:
    """Remove temporary folders left by an interrupted write."""
    root = Path(root)
    if root.is_dir() and world()[0] == 0:
        for p in root.iterdir():
            if p.name.startswith(".step-") and p.name.endswith(".tmp"):
                shutil.rmtree(p, ignore_errors=True)


def save_checkpoint(learner: Any, root: Path, step: int, extra: Optional[dict[str, Any]] = None) -> Path:
    """Write the learner's state at `step` under root; return the final folder. Raises CheckpointError.
    Nothing older is removed here: record the new checkpoint, then call prune_checkpoints."""
    rank, size = world()
    root = Path(root)
    final = checkpoint_dir(root, step)
    tmp = root / f".{final.name}.tmp"
    error = ""
    try:
        if rank == 0:
            root.mkdir(parents=True, exist_ok=True)
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir()
        barrier()
        _write(learner, tmp, step, extra or {}, rank, size)
    except Exception as exc:  # OSError (disk full, permissions), or a serialisation failure
        error = f"{type(exc).__name__}: {exc}"
    errors = [e for e in _gather(error) if e]
    if errors:
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(f"checkpoint at step {step} could not be written to {final}: {errors[0]}; "
                              "the previous checkpoint is intact")
    if rank == 0:
        if final.exists():  # rewriting the same step (a resumed run): replace it
            old = root / f".{final.name}.old"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(final, old)
            os.rename(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, final)
        _fsync_dir(root)
    barrier()
    return final


def prune_checkpoints(root: Path, keep: int) -> list[Path]:
    """Remove all but the newest `keep` complete checkpoints (0 = keep all); returns the removed folders."""
    if not keep:
        return []
    pruned = list_checkpoints(root)[:-keep]
    for old in pruned:
        shutil.rmtree(old, ignore_errors=True)
    return pruned


def _gather(error: str) -> list[str]:
    from trainer.learning.distributed import all_gather_objects

    return all_gather_objects(error)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def _write(learner: Any, tmp: Path, step: int, extra: dict[str, Any], rank: int, size: int) -> None:
    policy, critic = learner.policy, learner.critic
    policy_sd = _full_state_dict(policy)
    critic_sd = _full_state_dict(critic) if critic is not None else None
    if policy.deepspeed is not None:  # every rank writes its optimizer shard
        policy.deepspeed.save_checkpoint(str(tmp / "deepspeed" / "policy"), tag="state")
        if critic is not None:
            critic.deepspeed.save_checkpoint(str(tmp / "deepspeed" / "critic"), tag="state")
    if rank != 0:
        torch.save(rng_state(), tmp / f"rng_rank{rank}.pt")
        return
    if learner.config.lora:
        policy.module.save_pretrained(tmp / "policy_adapter")
        learner.merged_policy().save_pretrained(tmp / "policy", safe_serialization=True)
    else:
        policy.module.save_pretrained(tmp / "policy", safe_serialization=True, state_dict=policy_sd)
    learner.tokenizer.save_pretrained(tmp / "policy")
    if critic is not None:
        (tmp / "critic").mkdir()
        critic.module.save(tmp / "critic", critic_sd)
    state = {
        "step": step, "world_size": size, "config": learner.config.to_dict(), "rng": rng_state(),
        "policy_optimizer": None if policy.deepspeed else policy.optimizer.state_dict(),
        "policy_scheduler": None if policy.deepspeed else policy.scheduler.state_dict(),
        "critic_optimizer": None if critic is None or critic.deepspeed else critic.optimizer.state_dict(),
        "critic_scheduler": None if critic is None or critic.deepspeed else critic.scheduler.state_dict(),
        "policy_trainable": _trainable(policy.module) if learner.config.lora else None,
        **extra,
    }
    torch.save(state, tmp / STATE_FILE)


def _trainable(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().cpu().clone() for n, p in module.named_parameters() if p.requires_grad}


def _full_state_dict(opt: Any) -> Optional[dict[str, torch.Tensor]]:
    """The module's full weights (ZeRO-3 gathers its partitions; other stages hold full weights)."""
    if opt.deepspeed is not None and opt.deepspeed.zero_optimization_stage() == 3:
        return opt.deepspeed._zero3_consolidated_16bit_state_dict()
    return None


def load_checkpoint(learner: Any, path: Path) -> dict[str, Any]:
    """Restore optimizer, scheduler, RNG (and DeepSpeed) state into a learner whose weights were loaded
    from `path`/policy and `path`/critic; returns the trainer state (step, extras)."""
    path = Path(path)
    state_file = path / STATE_FILE
    if not state_file.exists():
        raise CheckpointError(f"{path} is not a complete checkpoint (no {STATE_FILE})")
    state = safe_load(state_file)
    rank, size = world()
    if state.get("world_size", 1) != size and learner.policy.deepspeed is not None:
        raise CheckpointError(f"{path} was written by {state['world_size']} ranks; resume with the same number "
                              f"(now {size})")
    policy, critic = learner.policy, learner.critic
    if policy.deepspeed is not None:
        check_deepspeed_files(path / "deepspeed", rank)
        policy.deepspeed.load_checkpoint(str(path / "deepspeed" / "policy"), tag="state")
        if critic is not None:
            critic.deepspeed.load_checkpoint(str(path / "deepspeed" / "critic"), tag="state")
    else:
        if state.get("policy_trainable"):
            named = dict(policy.module.named_parameters())
            with torch.no_grad():
                for name, value in state["policy_trainable"].items():
                    named[name].copy_(value)
        policy.optimizer.load_state_dict(state["policy_optimizer"])
        policy.scheduler.load_state_dict(state["policy_scheduler"])
        if critic is not None and state.get("critic_optimizer") is not None:
            critic.optimizer.load_state_dict(state["critic_optimizer"])
            critic.scheduler.load_state_dict(state["critic_scheduler"])
    rng_file = path / f"rng_rank{rank}.pt"
    set_rng_state(safe_load(rng_file) if rank and rng_file.exists() else state["rng"])
    return state
