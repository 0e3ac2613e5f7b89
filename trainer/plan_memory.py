"""The transient parts of a memory plan (trainer.plan): what one process holds only while it samples, runs a
forward/backward, or steps the optimizer, each from the code that allocates it.

- activations (the learner's forward/backward of one micro-batch, s = max_dialogue_tokens, b = micro_batch_size,
  p = bytes of the training dtype): the tensors autograd keeps per decoder layer of a Llama/Qwen2-style model
  (RMSNorm, rotary attention through SDPA, gated SiLU MLP of width I), read off transformers' modeling code:
  each RMSNorm keeps its float32 copy of the input and the normalised output (2 x (4 + p) s b h); attention keeps
  q, k and v after the rotary embedding (k and v repeated to all heads: repeat_kv runs whenever a padding mask is
  given), SDPA's output and o_proj's input (5 p s b h); the MLP keeps gate_proj's and up_proj's outputs, SiLU's
  output and down_proj's input (4 p s b I). Fused SDPA kernels keep no s x s scores on GPUs; on CPU the math
  fallback keeps the scores and their softmax (2 p a s^2 b, Korthikanti et al. 2022, arXiv 2205.05198, Sec. 4.1).
  LoRA keeps lora_A's output (r p s b) per adapted projection. Gradient checkpointing keeps each layer's input
  (p s b h) and one layer recomputed in full. Plus the final norm and the loss's logits at the policy's token
  positions (trainer.learning.learner.Learner._logprobs: the dtype's logits while they are cast, the float32
  logits, the entropy's softmax and its product with the logits, or in the backward the float32 gradient:
  p + 12 bytes per vocabulary entry).
- optimizer_step_temp: torch AdamW's multi-tensor step (the default on CUDA) allocates sqrt(second moments), one
  tensor per trained parameter in the dtype (torch/optim/adam.py, _multi_tensor_adam: torch._foreach_sqrt);
  on CPU the per-parameter loop holds one at a time (the largest). DeepSpeed's optimizers step in place: 0.
- sampling (the transformers engine; vLLM holds its cache for good, counted among the persistent parts):
  the KV cache of every dialogue of the rank at once: the static path (trainer.policies.static_decode) pads the
  batch to a power of two and the length (max_dialogue_tokens + max_new_tokens) to a multiple of its bucket;
  generate's growing cache concatenates one layer at a time (old and new copies of one layer live together);
  the prompt's forward (prefill) holds, in its widest layer, the hidden stream, q/k/v/attention output and the
  MLP's gate, up and product (p s_rows (6 h + 3 I)), plus CPU attention scores; the logits of the last position and
  the sampler's float32 / float64 working copies (p + 32 bytes per vocabulary entry and row).

When sampling and learning take turns (max_staleness 0) the peak is the larger of the two phases; when the
overlapped rollout samples during the update (max_staleness >= 1) they add up.
"""
from __future__ import annotations

import math
from typing import Any

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
STATIC_CACHE_BUCKET = 256  # trainer.policies.static_decode.CACHE_BUCKET (kept equal by a test)
SAMPLER_BYTES_PER_LOGIT = 32  # Picker: float32 logits, log_softmax, Gumbel noise; float64 uniforms


def layer_activation_bytes(shape: Any, s: int, b: int, p: int, device: str, lora_r: int, lora_targets: int) -> float:
    """Bytes autograd keeps for one decoder layer (see the module docstring)."""
    h, inter, a = shape.hidden, shape.intermediate, shape.heads
    per_token = 2 * (4 + p) * h + 5 * p * h + 4 * p * inter + lora_r * p * lora_targets
    scores = 2 * p * a * s * s * b if device == "cpu" else 0
    return s * b * per_token + scores


def activation_bytes(shape: Any, config: Any, device: str, checkpointing: bool) -> int:
    """Peak activations of one forward/backward of a micro-batch."""
    s, b, p = config.max_dialogue_tokens, config.micro_batch_size, DTYPE_BYTES[config.dtype]
    targets = len(config.lora_target_modules) if config.lora else 0
    layer = layer_activation_bytes(shape, s, b, p, device, config.lora_r if config.lora else 0, targets)
    layers = (p * s * b * shape.hidden * shape.layers + layer) if checkpointing else layer * shape.layers
    final_norm = (4 + p) * s * b * shape.hidden
    logit_positions = min(config.max_turns * config.max_new_tokens, config.max_dialogue_tokens)
    logits = logit_positions * b * shape.vocab * (p + 12)
    return int(layers + final_norm + logits)


def optimizer_step_bytes(shape: Any, trainable: int, config: Any, device: str) -> int:
    """torch AdamW's temporary sqrt of the second moments (0 under DeepSpeed)."""
    if config.zero_stage:
        return 0
    p = DTYPE_BYTES[config.dtype]
    return p * (trainable if device == "cuda" else min(trainable, shape.largest_layer_params))


def kv_bytes_per_token(shape: Any, dtype_bytes: int = 2) -> int:
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype_bytes


def sampling_bytes(shape: Any, config: Any, device: str, total_gpus: int) -> dict[str, int]:
    """The transformers engine's peak while it samples every dialogue of the rank at once, by part."""
    p = DTYPE_BYTES[config.dtype]
    rows = -(-config.dialogues_per_step // total_gpus)
    if config.max_staleness:  # the overlapped rollout may hold the next step's dialogues as well
        rows *= 2
    s = config.max_dialogue_tokens
    length = s + config.max_new_tokens
    static = device == "cuda"  # the engine's "auto" decode path (trainer.policies.hf_engine)
    if static:
        batch = 1 << max(0, rows - 1).bit_length()
        length = math.ceil(length / STATIC_CACHE_BUCKET) * STATIC_CACHE_BUCKET
        kv = batch * length * kv_bytes_per_token(shape, p)
    else:
        batch = rows
        kv = int(batch * length * kv_bytes_per_token(shape, p) * (1 + 1 / shape.layers))
    prefill = batch * s * p * (6 * shape.hidden + 3 * shape.intermediate)
    if device == "cpu":
        prefill += batch * shape.heads * s * s * 4 * 2
    logits = batch * shape.vocab * (p + SAMPLER_BYTES_PER_LOGIT)
    return {"sampling_kv_cache": kv, "sampling_prefill": prefill, "sampling_logits": logits}


def transient_peak(parts: dict[str, int], overlapped: bool) -> int:
    """The phases' peak: learner = max(activations, optimizer_step_temp); sampling = its parts' sum; the larger
    of the two when they take turns, their sum when they overlap (max_staleness >= 1)."""
    learner = max(parts.get("activations", 0), parts.get("optimizer_step_temp", 0))
    sampling = sum(v for k, v in parts.items() if k.startswith("sampling_"))
    return learner + sampling if overlapped else max(learner, sampling)


def transient_notes(config: Any, overlapped: bool) -> list[str]:
    return ["transient_peak: the larger of the learner's phase (activations of one micro-batch, or torch AdamW's "
            "step temporaries) and the sampling phase (KV cache, prefill, logits)" + (
                ", added together: the overlapped rollout samples during the update (max_staleness "
                f"{config.max_staleness})" if overlapped else ", which take turns (max_staleness 0)")
            + "; each is in `transients` (trainer.plan_memory says where each number comes from)"]
