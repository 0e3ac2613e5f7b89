"""What a memory plan (trainer.plan) works from, the model's shape (ModelShape) and the hardware's (Hardware),
and the persistent bytes that follow from them: a trained model's states under DeepSpeed ZeRO, and vLLM's share.

- Parameter counts: the model's own config (transformers AutoConfig from its folder), the model built with
  `from_config` on the meta device (no weights are read or downloaded) and its parameters counted. When the
  folder is not on this machine and AutoConfig cannot be had offline, the architecture numbers of the
  model's published config.json (KNOWN_ARCHITECTURES, matched by the folder's name) are used instead.
- Model states (16-bit weights, gradients, fp32 master weights, Adam moments) under DeepSpeed ZeRO: DeepSpeed's
  own estimators, estimate_zero2_model_states_mem_needs (ZeRO-1/2) and estimate_zero3_model_states_mem_needs
  (ZeRO-3). A part's weights are the estimate with the optimizer offloaded; its gradients + optimizer are the
  rest. ZeRO-1 keeps the full 16-bit gradients on every GPU (ZeRO, Rajbhandari et al. 2020, Fig. 1), so
  2 bytes x (1 - 1/N) per trainable parameter are added to the ZeRO-2 estimate. Without DeepSpeed:
  torch AdamW in the training dtype (weights, gradients and two moments: dtype bytes x 1 + 3 per trainable).
- vLLM: its weights in 16 bits, and the KV cache: the gpu_memory_utilization share the lab's VLLMEngine
  reserves (0.5 of the GPU, weights included) when the GPU's memory is known, else 2 x layers x kv_heads x
  head_dim x 2 bytes per token for every dialogue of the rank at max_dialogue_tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.config import TrainConfig
from trainer.plan_memory import GIB, kv_bytes_per_token

VLLM_GPU_MEMORY_UTILIZATION = 0.5  # trainer.policies.vllm_engine.VLLMEngine's default, which RLTrainer keeps
# Published config.json numbers (Hugging Face hub, Qwen/Qwen2.5-7B-Instruct and -1.5B-Instruct), used only when the
# model's folder is absent and AutoConfig cannot be had offline.
KNOWN_ARCHITECTURES: dict[str, dict[str, Any]] = {
    "Qwen2.5-7B-Instruct": {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
                            "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
                            "vocab_size": 152064, "max_position_embeddings": 32768, "tie_word_embeddings": False},
    "Qwen2.5-1.5B-Instruct": {"model_type": "qwen2", "hidden_size": 1536, "intermediate_size": 8960,
                              "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
                              "vocab_size": 151936, "max_position_embeddings": 32768, "tie_word_embeddings": True},
}


@dataclass
class ModelShape:
    """What the plan needs of a model's architecture, and where it came from."""
    name: str
    source: str
    total_params: int
    largest_layer_params: int  # the largest single parameter tensor (ZeRO-3 gathers one at a time)
    lm_head_params: int  # 0 when tied to the embedding
    lora_params: int  # trainable LoRA parameters for the config's rank and target modules (0 without LoRA)
    hidden: int
    intermediate: int  # the MLP's width (4 x hidden where the config names none)
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


@dataclass
class Hardware:
    """Where the plan is for: the device, how many GPUs (processes on CPU) and their memory."""
    device: str  # cuda | cpu
    gpus_per_node: int
    nodes: int
    memory_gib: float  # per GPU (per process on CPU)
    memory_source: str

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes


# ------------------------------------------------------------------------------------------ parameters
def model_shape(spec: str, lora_r: int = 0, lora_targets: tuple[str, ...] = ()) -> ModelShape:
    """The architecture of a policy spec ('default' or a folder), counted on the meta device."""
    from transformers import AutoConfig

    from trainer.policies.spec import PolicySpec

    name = Path(spec).name if spec != "default" else "SmolLM2-135M-Instruct"
    try:
        folder = PolicySpec(spec).local_model()
        hf_config = AutoConfig.from_pretrained(folder)
        source = f"config.json of {folder}"
    except (OSError, ValueError) as exc:
        known = KNOWN_ARCHITECTURES.get(name)
        if known is None:
            raise ValueError(f"model {spec!r}: no config.json to count its parameters ({exc}); known "
                             f"architectures without a folder: {', '.join(KNOWN_ARCHITECTURES)}") from None
        hf_config = AutoConfig.for_model(**known)
        source = (f"{name}'s published config.json numbers (trainer.plan_shapes.KNOWN_ARCHITECTURES): {spec} is not on "
                  f"this machine and AutoConfig cannot fetch it offline")
    return shape_from_config(hf_config, name, source, lora_r, lora_targets)


def shape_from_config(hf_config: Any, name: str, source: str, lora_r: int = 0,
                      lora_targets: tuple[str, ...] = ()) -> ModelShape:
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(hf_config)
    params = list(model.parameters())  # tied tensors are listed once
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is model.get_input_embeddings().weight
    lora = 0
    if lora_r:
        for module_name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear) and module_name.split(".")[-1] in lora_targets and \
                    module is not head:
                lora += lora_r * (module.in_features + module.out_features)
    heads = hf_config.num_attention_heads
    hidden = hf_config.hidden_size
    return ModelShape(name=name, source=source, total_params=sum(p.numel() for p in params),
                      largest_layer_params=max(p.numel() for p in params),
                      lm_head_params=0 if tied or head is None else head.weight.numel(), lora_params=lora,
                      hidden=hidden, intermediate=getattr(hf_config, "intermediate_size", None) or 4 * hidden,
                      layers=hf_config.num_hidden_layers, heads=heads,
                      kv_heads=getattr(hf_config, "num_key_value_heads", None) or heads,
                      head_dim=getattr(hf_config, "head_dim", None) or hidden // heads,
                      vocab=hf_config.vocab_size)


# ----------------------------------------------------------------------------------------- the parts
def model_state_bytes(total: int, trainable: int, largest: int, zero_stage: int, hw: Hardware,
                      dtype_bytes: int, offload_optimizer: bool = False, offload_params: bool = False
                      ) -> tuple[int, int]:
    """(weights, gradients + optimizer states) in bytes per GPU for one trained model."""
    if zero_stage == 0:
        return total * dtype_bytes, trainable * dtype_bytes * 3
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    n = dict(num_gpus_per_node=hw.gpus_per_node, num_nodes=hw.nodes)
    if zero_stage == 3:
        weights = estimate_zero3_model_states_mem_needs(total, largest, cpu_offload=True,
                                                        cpu_offload_params=offload_params, **n)[1]
        everything = weights if offload_optimizer else \
            estimate_zero3_model_states_mem_needs(total, largest, cpu_offload=False, **n)[1]
        return weights, everything - weights
    frozen = total - trainable  # frozen weights (LoRA's base) are plain 16-bit copies on every GPU
    weights = estimate_zero2_model_states_mem_needs(trainable, cpu_offload=True, **n)[1] + 2 * frozen
    states = estimate_zero2_model_states_mem_needs(trainable, cpu_offload=offload_optimizer, **n)[1] - \
        estimate_zero2_model_states_mem_needs(trainable, cpu_offload=True, **n)[1]
    if zero_stage == 1:  # ZeRO-1 partitions only the optimizer states: full 16-bit gradients on every GPU
        states += int(2 * trainable * (1 - 1 / hw.total_gpus))
    return weights, states


def vllm_bytes(shape: ModelShape, config: TrainConfig, hw: Hardware, memory_known: bool) -> tuple[int, int]:
    """(vLLM weights, vLLM KV cache) per GPU; the KV is the rest of its memory share when the GPU's memory is
    known, else what the rank's dialogues need at max_dialogue_tokens."""
    weights = shape.total_params * 2
    if hw.device == "cuda" and memory_known:
        return weights, max(0, int(VLLM_GPU_MEMORY_UTILIZATION * hw.memory_gib * GIB) - weights)
    per_rank = -(-config.dialogues_per_step // hw.total_gpus)
    return weights, kv_bytes_per_token(shape) * config.max_dialogue_tokens * per_rank
