"""The learner's weights as a stream of buckets, for pushing into a sampling engine without a full copy.

A push used to build the whole merged state dict (a second copy of the model; on GPU a full CPU copy for
vLLM). Here the weights leave the learner one bucket at a time, in HF parameter names:

    layer groups   parameters are grouped by their parent layer (`model.layers.N` for a decoder layer, the
                   module for the rest) and a group is never split: vLLM processes a layer once all its
                   weights have arrived (fused q/k/v and gate/up loaders need every part), so a stream in
                   layer order keeps at most one layer's buffers in flight;
    buckets        consecutive groups are packed up to `bucket_bytes` (a group larger than that is a bucket
                   of its own); the consumer moves one bucket to its device at a time;
    LoRA           a wrapped base weight is merged on the fly, W + get_delta_weight() (peft's own formula), for
                   its module only: no merged copy of the model;
    ZeRO-3         each group is gathered just for its own bucket (GatheredParameters) and cloned out.

The producer is the learner (trainer.learning.learner.Learner.stream_policy_weights); the consumers are
VLLMEngine.load_weights (one in-place reload fed lazily, trainer.policies.vllm_engine) and
HFEngine.load_weights (an in-place copy per tensor, trainer.policies.hf_engine).
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Any

from torch import Tensor, nn

Bucket = list[tuple[str, Tensor]]

_LAYER = re.compile(r"^(.*?\blayers\.\d+)\.")
_PEFT_PREFIX = "base_model.model."


def layer_key(name: str) -> str:
    """The parent layer of a parameter: `model.layers.3` for anything inside decoder layer 3, else its module."""
    m = _LAYER.match(name)
    return m.group(1) if m else name.rpartition(".")[0]


def bucketed(named: Iterable[tuple[str, Tensor]], bucket_bytes: int) -> Iterator[Bucket]:
    """Pack consecutive layer groups of (name, tensor) pairs into buckets of at most `bucket_bytes`; a group is
    never split (one larger than the budget is a bucket of its own)."""
    bucket: Bucket = []
    size = 0
    for _, group_iter in itertools.groupby(named, key=lambda pair: layer_key(pair[0])):
        group = list(group_iter)
        # ZeRO-3 partitions report 0 elements; ds_numel is the whole size
        group_size = sum(getattr(t, "ds_numel", t.numel()) * t.element_size() for _, t in group)
        if bucket and size + group_size > bucket_bytes:
            yield bucket
            bucket, size = [], 0
        bucket.extend(group)
        size += group_size
    if bucket:
        yield bucket


def merged_lora_weights(peft_model: nn.Module) -> Iterator[tuple[str, Tensor]]:
    """The weights merge_and_unload() would give, in its names, without merging a copy of the model."""
    from peft.tuners.lora import LoraLayer

    lora = {name: m for name, m in peft_model.named_modules() if isinstance(m, LoraLayer)}
    for key, value in peft_model.state_dict().items():
        if ".lora_" in key:
            continue
        module_name, _, param = key.rpartition(".")
        owner = module_name[:-len(".base_layer")] if module_name.endswith(".base_layer") else None
        if owner in lora and param == "weight":
            module = lora[owner]
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    value = value + module.get_delta_weight(adapter).to(value.dtype)
        name = key.removeprefix(_PEFT_PREFIX)
        yield name.replace(".base_layer.", "."), value.detach()


def gathered_weights(model: nn.Module, bucket_bytes: int) -> Iterator[Bucket]:
    """ZeRO-3: every bucket's partitions gathered for that bucket only, cloned out before they are released.
    Parameters only: a tied weight (lm_head = embeddings) is sent once; the engine ties it itself."""
    import deepspeed

    for bucket in bucketed(model.named_parameters(), bucket_bytes):
        with deepspeed.zero.GatheredParameters([p for _, p in bucket]):
            out = [(n, p.detach().clone()) for n, p in bucket]
        yield out


def stream_weights(model: nn.Module, bucket_bytes: int, lora: bool = False, zero3: bool = False) -> Iterator[Bucket]:
    """The model's full weights (LoRA merged, ZeRO-3 gathered) in buckets; see the module docstring."""
    if zero3:
        return gathered_weights(model, bucket_bytes)
    named: Iterable[tuple[str, Tensor]] = (merged_lora_weights(model) if lora
                                           else ((k, v.detach()) for k, v in model.state_dict().items()))
    return bucketed(named, bucket_bytes)


def as_buckets(weights: Any, bucket_bytes: int = 1 << 30) -> Iterator[Bucket]:
    """Accept a state dict (one stream) or an iterable of buckets, as the engines' load_weights do."""
    if isinstance(weights, dict):
        return bucketed(((k, v.detach()) for k, v in weights.items()), bucket_bytes)
    return iter(weights)
