"""Data-parallel plumbing: one code path for a single process and for DeepSpeed ZeRO 1/2/3.

Under the `deepspeed` launcher (or torchrun-style RANK / WORLD_SIZE / MASTER_ADDR variables) every rank
runs the same trainer: it rolls out its share of the profiles, computes its share of the loss, and
DeepSpeed averages the gradients. On machines without GPUs DeepSpeed uses its CPU accelerator with gloo
(set DS_ACCELERATOR=cpu; `init_distributed` does so when CUDA is absent).

`Optimized` hides the difference: `backward(loss)` and `step() -> grad norm` behave the same with and
without DeepSpeed. Losses are normalised by the global token count of the minibatch (see algorithms.py),
so the gradient of N ranks equals the gradient of 1 rank on the whole minibatch.
"""
from __future__ import annotations

import atexit
import json
import os
from typing import Any, Optional

import torch

_DS_INITIALISED = False


def world() -> tuple[int, int]:
    """(rank, world size); (0, 1) when not distributed."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def is_main() -> bool:
    return world()[0] == 0


def init_distributed(zero_stage: int) -> tuple[int, int]:
    """Join the process group when DeepSpeed is configured or a launcher set WORLD_SIZE > 1."""
    global _DS_INITIALISED
    wants = zero_stage > 0 or int(os.environ.get("WORLD_SIZE", 1)) > 1
    if not wants or (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return world()
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        _without_the_shm_op()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    import deepspeed

    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    _DS_INITIALISED = True
    atexit.register(leave_process_group)
    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    return world()


def check_ranks(nodes: int, gpus: int, world_size: int) -> None:
    """A run of `nodes` > 1 has nodes x max(gpus, 1) ranks (trainer.learning.ray_ranks places them on the ray
    backend); started with another number (one local process, a launcher set otherwise) it would train another
    shape than the one planned: ValueError naming the settings."""
    if nodes > 1 and world_size != nodes * max(gpus, 1):
        raise ValueError(f"nodes: {nodes} with gpus: {gpus} runs {nodes * max(gpus, 1)} rank(s), placed by Ray "
                         f"(--jobs ray, docs/cluster.md); this run has {world_size}")


def leave_process_group() -> None:
    """Destroy the process group before the interpreter exits (registered by init_distributed). Left to the
    C++ static destructors, gloo's threads were sometimes still joinable and the rank aborted ("terminate
    called without an active exception", exit -6) after its work was done: one ZeRO-3 run in six here. A run that
    ends well also passes a `barrier` first (RLTrainer.train): see there."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _without_the_shm_op() -> None:
    """DeepSpeed's CPU backend compiles a shared-memory C++ op (deepspeed_shm_comm) the first time it starts on
    a machine: about two minutes of a core, in every rank's start-up on a fresh machine. The op serves only
    `inference_all_reduce`, which falls back to the process group without it; training's all-reduce goes
    through gloo either way. So CPU runs do not build it."""
    import importlib

    backend = importlib.import_module("deepspeed.comm.torch")  # `from deepspeed.comm import torch` is torch itself
    if hasattr(backend, "build_shm_op"):
        backend.build_shm_op = lambda: None


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over ranks (identity on one process)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized() and world()[1] > 1:
        t = t.clone()
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
    return t


def all_reduce_max(value: int) -> int:
    """The largest `value` over ranks."""
    t = torch.tensor([value], dtype=torch.long)
    if torch.distributed.is_available() and torch.distributed.is_initialized() and world()[1] > 1:
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def all_gather_objects(obj: Any) -> list[Any]:
    """Every rank's `obj`, in rank order ([obj] on one process)."""
    rank, size = world()
    if size == 1 or not torch.distributed.is_initialized():
        return [obj]
    out: list[Any] = [None] * size
    torch.distributed.all_gather_object(out, obj)
    return out


def broadcast_object(obj: Any, src: int = 0) -> Any:
    if world()[1] == 1 or not torch.distributed.is_initialized():
        return obj
    box = [obj]
    torch.distributed.broadcast_object_list(box, src=src)
    return box[0]


def barrier() -> None:
    """Wait for every rank. On gloo it also completes every collective this rank enqueued before it: a rank
    that leaves with an asynchronous collective (ZeRO-3's gathers) still finishing on gloo's threads can have it
    end during the interpreter's teardown, and the thread that then frees its tensors aborts the rank (-6)."""
    if world()[1] > 1 and torch.distributed.is_initialized():
        torch.distributed.barrier()


def deepspeed_config(zero_stage: int, micro_batch_size: int, world_size: int, max_grad_norm: float,
                     dtype: str, extra_file: str = "") -> dict[str, Any]:
    """The DeepSpeed JSON for one model, from the training config (extra_file merged over it).
    Accumulation is manual (see Optimized), so DeepSpeed's own accumulation count is 1."""
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro_batch_size,
        "gradient_accumulation_steps": 1,
        "train_batch_size": micro_batch_size * world_size,
        "gradient_clipping": max_grad_norm,
        "zero_optimization": {"stage": zero_stage, "overlap_comm": False, "contiguous_gradients": True},
        "bf16": {"enabled": dtype == "bfloat16"},
        "fp16": {"enabled": dtype == "float16"},
        "steps_per_print": 10**9,
        "wall_clock_breakdown": False,
    }
    if zero_stage == 3:
        cfg["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"] = True
    if extra_file:
        from simulator.access import current_access

        _merge(cfg, json.loads(current_access().path("deepspeed_config", extra_file).read_text()))
    return cfg


def _merge(base: dict, over: dict) -> None:
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v


class Optimized:
    """A trainable module with its optimizer and scheduler; plain PyTorch or a DeepSpeed engine.

    Gradient accumulation is driven by the caller (`backward(loss, boundary)` per micro-batch, then one
    `step()`), because the number of micro-batches varies with the dialogues. DeepSpeed averages gradients
    over ranks, so a loss already normalised by the global token count is multiplied back by the world size.
    """

    def __init__(self, module: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
                 max_grad_norm: float, ds_config: Optional[dict[str, Any]] = None):
        self.max_grad_norm = max_grad_norm
        self.deepspeed = None  # DeepSpeed's engine (deepspeed.initialize) when ds_config is given
        if ds_config is not None:
            import deepspeed

            self.deepspeed, optimizer, _, scheduler = deepspeed.initialize(
                model=module, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config)
            self.loss_scale = float(world()[1])
            module = self.deepspeed.module
        else:
            self.loss_scale = 1.0
        self.module, self.optimizer, self.scheduler = module, optimizer, scheduler

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self.deepspeed or self.module)(*args, **kwargs)

    def backward(self, loss: torch.Tensor, boundary: bool = True) -> None:
        """Accumulate the gradient of `loss`; `boundary` marks the last micro-batch before step()."""
        if self.deepspeed is not None:
            self.deepspeed.set_gradient_accumulation_boundary(boundary)
            self.deepspeed.backward(loss * self.loss_scale)
        else:
            loss.backward()

    def step(self) -> float:
        """Apply the accumulated gradient (clipped); return the gradient norm before clipping."""
        if self.deepspeed is not None:
            self.deepspeed.step()
            norm = self.deepspeed.get_global_grad_norm()
            return float(norm) if norm is not None else float("nan")
        params = [p for p in self.module.parameters() if p.requires_grad]
        norm = torch.nn.utils.clip_grad_norm_(params, self.max_grad_norm if self.max_grad_norm > 0 else 1e12)
        self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(norm)

    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])
