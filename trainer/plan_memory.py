"""The transient parts of a memory plan (trainer.plan): what one process holds only while it samples, runs a
forward/backward, or steps the optimizer, each from the code that allocates it.

- activations (the learner's forward/backward of its widest micro-batch: micro_batch_size x max_dialogue_tokens
  padded tokens, or max_tokens_per_micro_batch when set, filled with at most one minibatch's rows,
  trainer.learning.batch.micro_batches; with one policy turn the rows are the counted first prompt and its
  reply, `dialogue_tokens`; p = bytes of the training dtype): the tensors autograd keeps per decoder layer
  of a Llama/Qwen2-style model
  (RMSNorm, rotary attention through SDPA, gated SiLU MLP of width I), read off transformers' modeling code:
  each RMSNorm keeps its float32 copy of the input and the normalised output (2 x (4 + p) s b h); attention keeps
  q, k and v after the rotary embedding (k and v repeated to all heads), SDPA's output and o_proj's input
  (5 p s b h) and the fused kernel's float32 log-sum-exp per head (4 a s b); the MLP keeps gate_proj's and
  up_proj's outputs, SiLU's output and down_proj's input (4 p s b I). The learner passes no padding mask (its
  rows are right-padded and cut to the longest, trainer.learning.learner.Learner._rows), so SDPA's fused path
  runs on CPU as on GPUs and keeps no s x s scores (with a mask, CPU SDPA keeps a float32 copy of it, 4 b s^2
  per layer: measured with torch.autograd.graph.saved_tensors_hooks).
  LoRA keeps lora_A's output (r p s b) per adapted projection; with lora_dropout > 0 peft's LoRA Linear feeds
  lora_A a dropped-out copy of its input, which lora_A keeps, and dropout keeps its boolean mask ((p + 1) s b
  x the projection's input width: I for down_proj, h otherwise; 0 with dropout 0, where peft's dropout is
  nn.Identity). Gradient checkpointing keeps each layer's input
  (p s b h) and one layer recomputed in full. Plus the final norm and the loss's LM head at the policy's token
  positions (logit_chunk_bytes: one chunk of logits, trainer.learning.head_logprobs, never [s, V] at once; for a
  trained 16-bit head also the float32 [V, H] sum of its weight's gradient, head_grad_bytes).
- optimizer_step_temp: torch AdamW's multi-tensor step (the default on CUDA) allocates sqrt(second moments), one
  tensor per trained parameter in the dtype (torch/optim/adam.py, _multi_tensor_adam: torch._foreach_sqrt);
  on CPU the per-parameter loop holds one at a time (the largest). DeepSpeed's optimizers step in place: 0.
- sampling (the transformers engine; vLLM holds its cache for good, counted among the persistent parts):
  the KV cache of every dialogue of the rank at once: the static path (trainer.policies.static_decode) pads the
  batch to a power of two and the length (max_dialogue_tokens + max_new_tokens) to a multiple of its bucket;
  generate's growing cache concatenates one layer at a time (old and new copies of one layer live together);
  the prompt's forward (prefill) holds, in its widest layer, the hidden stream, q/k/v/attention output and the
  MLP's gate, up and product (p s_rows (6 h + 3 I); the static path runs rows in groups of at most
  STATIC_PREFILL_TOKENS padded tokens, each group's own cache copied into the static cache after), plus on
  CPU the left-padded batch's boolean s x s mask and the float32 copy SDPA's fused CPU kernel makes of it
  (5 bytes per entry and row; no per-head scores); the logits of the last position and the sampler's
  float32 / float64 working copies (p + 32 bytes per vocabulary entry and row). Each dialogue's
  cache is also kept between its turns (trainer.policies.kept_caches.KeptCaches, at most KEPT_DIALOGUES):
  sampling_kept_kv, up to max_dialogue_tokens a dialogue (none with max_turns 1: the trainer's engine keeps
  none); on the generate path (CPU) beside the batch's left-padded copy built from it (counted in the cache
  above), on the static path (CUDA) beside the two rows' caches in flight while they are copied into the
  static cache. The trainer drops them before each update of shared weights, so they never sit beside the
  learner's phase.
- sampling_decode_graph (CUDA, kept between calls like the cache): the captured decode step's private memory
  pool holds what one step allocates (trainer.policies.static_decode._Slot/_capture): in the widest layer the
  hidden stream, q/k/v, attention output and MLP gate/up/product of each row (p (6 h + 3 I)), the grouped
  attention's scores over the cache (gqa_decode_attention: the matmul's p-byte output, its float32 copy,
  scaled, masked and softmaxed, cast back: (2 p + 16) a L per row), the step's logits (p V per row) and the
  sampler's working copies (32 bytes per vocabulary entry and row: the sampler is inside the graph), and the
  fixed buffers (ids, positions, row key: 24 bytes; the boolean mask: L bytes; the chosen ids and their
  float32 log-probs: 12 L bytes per row).
- cuda_workspaces (fixed, CUDA): torch gives every (cuBLAS handle, stream) pair its own workspace from the
  caching allocator, kept for the life of the process (ATen/cuda/CublasHandlePool.cpp,
  cublas_handle_stream_to_workspace; cuBLASLt reuses it: TORCH_CUBLASLT_UNIFIED_WORKSPACE is on by default).
  Its size is CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" pairs summed) or torch's default: 4096 x 8 KiB
  (32 MiB) on compute capability 9.x-12.x (Hopper, Blackwell), 4096 x 2 + 16 x 8 KiB (8.125 MiB) before; the
  larger when no GPU is at hand. Handles are per thread (DeviceThreadHandlePool): the learner's forward
  thread, autograd's CUDA worker thread for the backward (torch/csrc/autograd/engine.cpp runs a device's
  backward in its own thread), the sampling thread (asyncio.to_thread), and on the static path the sampling
  thread's two more streams (the capture's warm-up stream and torch.cuda.graph's capture stream): 5 pairs.

When sampling and learning take turns (max_staleness 0) the peak is the larger of the two phases; when the
overlapped rollout samples during the update (max_staleness >= 1) they add up.
"""
from __future__ import annotations

import math
import os
import re
from typing import Any, Optional

GIB = 1024 ** 3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
STATIC_CACHE_BUCKET = 256  # trainer.policies.static_decode.CACHE_BUCKET (kept equal by a test)
STATIC_PREFILL_TOKENS = 16_384  # trainer.policies.static_decode.PREFILL_TOKENS (kept equal by a test)
LOGIT_CHUNK_BYTES = 256 * 1024 ** 2  # trainer.learning.head_logprobs.LOGIT_CHUNK_BYTES (kept equal by a test)
HEAD_BYTES_PER_LOGIT = 16  # trainer.learning.head_logprobs.HEAD_BYTES_PER_LOGIT (kept equal by a test)
KEPT_DIALOGUES = 64  # trainer.policies.kept_caches.MAX_KEPT (kept equal by a test)
SAMPLER_BYTES_PER_LOGIT = 32  # Picker: float32 logits, log_softmax, Gumbel noise; float64 uniforms
CUBLAS_WORKSPACE_LARGE = 4096 * 8 * 1024  # torch's default on compute capability 9.x-12.x
CUBLAS_WORKSPACE_SMALL = (4096 * 2 + 16 * 8) * 1024  # torch's default before Hopper (":4096:2:16:8")
LEARNER_BLAS_PAIRS = 2  # the forward's thread and autograd's CUDA worker thread, on the default stream
SAMPLING_BLAS_PAIRS = 1  # the sampling thread on its default stream
STATIC_GRAPH_BLAS_PAIRS = 2  # the static path's warm-up stream and torch.cuda.graph's capture stream


def layer_activation_bytes(shape: Any, s: int, b: int, p: int, device: str, lora_r: int, lora_targets: int,
                           lora_dropout_width: int = 0) -> float:
    """Bytes autograd keeps for one decoder layer (see the module docstring); lora_dropout_width: the summed input
    width of the adapted projections when LoRA's dropout is on (else 0)."""
    h, inter, a = shape.hidden, shape.intermediate, shape.heads
    per_token = (2 * (4 + p) * h + 5 * p * h + 4 * p * inter + lora_r * p * lora_targets
                 + (p + 1) * lora_dropout_width)
    return s * b * per_token + 4 * a * s * b  # + the fused attention's float32 log-sum-exp per head and token


def dialogue_tokens(config: Any, first_prompt: Optional[int] = None) -> tuple[int, int]:
    """(the longest prompt a policy turn samples from, the longest dialogue the learner trains on). Both are
    max_dialogue_tokens (the budget's cap), except when the policy speaks once (max_turns 1) and the longest first
    prompt was counted (trainer.plan_offline): that prompt, and that prompt with its reply."""
    s = config.max_dialogue_tokens
    if first_prompt and config.max_turns == 1:
        prompt = min(s, first_prompt)
        return prompt, min(s, prompt + config.max_new_tokens)
    return s, s


def micro_batch_tokens(config: Any, row_tokens: Optional[int] = None) -> int:
    """The padded tokens of the learner's widest micro-batch: micro_batch_size x the longest row, or with
    max_tokens_per_micro_batch the budget, filled with rows of one minibatch (a row longer than it goes alone)."""
    row = row_tokens or config.max_dialogue_tokens
    if config.max_tokens_per_micro_batch:
        return max(row, min(config.max_tokens_per_micro_batch, config.minibatch_size * row))
    return config.micro_batch_size * row


def logit_chunk_bytes(shape: Any, positions: int, p: int, trained_head: bool = False) -> int:
    """The loss's LM head at `positions` policy tokens (trainer.learning.head_logprobs): one chunk of logits
    (HEAD_BYTES_PER_LOGIT per vocabulary entry, measured), the selected hidden states and their gradient (p h
    bytes each), the float32 log-prob, entropy and log-sum-exp (12 bytes a position), and, for a trained 16-bit
    head, the float32 [V, H] sum of its weight's gradient over the chunks (head_grad_bytes)."""
    chunk = min(positions, max(16, LOGIT_CHUNK_BYTES // (4 * shape.vocab)))
    return chunk * shape.vocab * HEAD_BYTES_PER_LOGIT + positions * (2 * p * shape.hidden + 12) \
        + (head_grad_bytes(shape, p) if trained_head else 0)


def head_grad_bytes(shape: Any, p: int) -> int:
    """The float32 [V, H] buffer the head's backward sums its weight's gradient in, beside the p-byte gradient
    autograd keeps anyway (0 for a float32 head, whose buffer is that gradient)."""
    return 4 * shape.vocab * shape.hidden if p != 4 else 0


def activation_bytes(shape: Any, config: Any, device: str, checkpointing: bool,
                     row_tokens: Optional[int] = None) -> int:
    """Peak activations of one forward/backward of the widest micro-batch (micro_batch_tokens)."""
    tokens, p = micro_batch_tokens(config, row_tokens), DTYPE_BYTES[config.dtype]
    targets = list(config.lora_target_modules) if config.lora else []
    dropout_width = sum(shape.intermediate if t == "down_proj" else shape.hidden for t in targets) \
        if config.lora_dropout > 0 else 0
    layer = layer_activation_bytes(shape, tokens, 1, p, device, config.lora_r if config.lora else 0, len(targets),
                                   dropout_width)
    layers = (p * tokens * shape.hidden * shape.layers + layer) if checkpointing else layer * shape.layers
    final_norm = (4 + p) * tokens * shape.hidden
    # a micro-batch's rows: micro_batch_size, or under a token budget at most one minibatch's dialogues
    rows = config.micro_batch_size if not config.max_tokens_per_micro_batch else min(config.minibatch_size, tokens)
    positions = min(tokens, rows * config.max_turns * config.max_new_tokens)
    trained_head = not config.lora and config.zero_stage != 3  # LoRA freezes it; ZeRO-3 takes the module path
    return int(layers + final_norm + logit_chunk_bytes(shape, positions, p, trained_head))


def optimizer_step_bytes(shape: Any, trainable: int, config: Any, device: str) -> int:
    """torch AdamW's temporary sqrt of the second moments (0 under DeepSpeed)."""
    if config.zero_stage:
        return 0
    p = DTYPE_BYTES[config.dtype]
    return p * (trainable if device == "cuda" else min(trainable, shape.largest_layer_params))


def kv_bytes_per_token(shape: Any, dtype_bytes: int = 2) -> int:
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * dtype_bytes


def sampling_bytes(shape: Any, config: Any, device: str, total_gpus: int,
                   prompt_tokens: Optional[int] = None) -> dict[str, int]:
    """The transformers engine's peak while it samples every dialogue of the rank at once, by part; prompt_tokens:
    the longest prompt (dialogue_tokens; max_dialogue_tokens when not given)."""
    p = DTYPE_BYTES[config.dtype]
    rows = -(-config.dialogues_per_step // total_gpus)
    if config.max_staleness:  # the overlapped rollout may hold the next step's dialogues as well
        rows *= 2
    s = prompt_tokens or config.max_dialogue_tokens
    if device == "cuda":  # the engine's "auto" decode path is the static one (trainer.policies.hf_engine)
        batch, length = static_graph_batch_length(config, total_gpus)
        kv = batch * length * kv_bytes_per_token(shape, p)
    else:
        batch = rows
        kv = int(batch * (s + config.max_new_tokens) * kv_bytes_per_token(shape, p) * (1 + 1 / shape.layers))
    prefill_rows = batch
    if device == "cuda":  # the static path prefills rows in groups of at most STATIC_PREFILL_TOKENS padded tokens
        prefill_rows = min(batch, max(1, STATIC_PREFILL_TOKENS // s))
    prefill = prefill_rows * s * p * (6 * shape.hidden + 3 * shape.intermediate)
    if device == "cuda" and prefill_rows < batch:  # a group's own cache, copied into the static cache after
        prefill += prefill_rows * s * kv_bytes_per_token(shape, p)
    parts = {"sampling_kv_cache": kv}
    if device == "cpu":
        prefill += batch * s * s * 5
    if config.max_turns > 1:  # each dialogue's cache kept between its turns (+ on CUDA two rows being copied)
        kept = min(rows, KEPT_DIALOGUES) + (2 if device == "cuda" else 0)
        parts["sampling_kept_kv"] = kept * s * kv_bytes_per_token(shape, p)
    logits = batch * shape.vocab * (p + SAMPLER_BYTES_PER_LOGIT)
    return {**parts, "sampling_prefill": prefill, "sampling_logits": logits}


def static_graph_batch_length(config: Any, total_gpus: int) -> tuple[int, int]:
    """(padded batch, cache length) of the static decode path for every dialogue of the rank at once."""
    rows = -(-config.dialogues_per_step // total_gpus) * (2 if config.max_staleness else 1)
    length = config.max_dialogue_tokens + config.max_new_tokens
    return 1 << max(0, rows - 1).bit_length(), math.ceil(length / STATIC_CACHE_BUCKET) * STATIC_CACHE_BUCKET


def decode_graph_bytes(shape: Any, config: Any, total_gpus: int) -> int:
    """The captured decode step's memory pool and static inputs (see the module docstring)."""
    p = DTYPE_BYTES[config.dtype]
    batch, length = static_graph_batch_length(config, total_gpus)
    per_row = (p * (6 * shape.hidden + 3 * shape.intermediate) + (2 * p + 16) * shape.heads * length
               + (p + SAMPLER_BYTES_PER_LOGIT) * shape.vocab + 24 + 13 * length)
    return batch * per_row


def cublas_workspace_bytes(config_text: Optional[str], capability: Optional[tuple[int, int]]) -> int:
    """One (handle, stream) pair's workspace: CUBLAS_WORKSPACE_CONFIG when set and parseable, else torch's default
    for the compute capability (the larger when it is unknown)."""
    pairs = re.findall(r":([0-9]+):([0-9]+)", config_text or "")
    if pairs:
        return sum(int(size) * int(count) for size, count in pairs) * 1024
    if capability is None or 9 <= capability[0] <= 12:
        return CUBLAS_WORKSPACE_LARGE
    return CUBLAS_WORKSPACE_SMALL


def cuda_workspace_bytes(transformers_engine: bool) -> int:
    """The cuBLAS workspaces of every (handle, stream) pair the learner and, with the transformers engine (whose
    decode path on CUDA is the static one), the sampler use (module docstring). vLLM's own share of the GPU
    (gpu_memory_utilization) covers its workspaces."""
    capability = None
    try:
        import torch

        if torch.cuda.is_available():
            capability = torch.cuda.get_device_capability(0)
    except (ImportError, RuntimeError):
        pass
    pairs = LEARNER_BLAS_PAIRS + (SAMPLING_BLAS_PAIRS + STATIC_GRAPH_BLAS_PAIRS if transformers_engine else 0)
    return pairs * cublas_workspace_bytes(os.environ.get("CUBLAS_WORKSPACE_CONFIG"), capability)


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
