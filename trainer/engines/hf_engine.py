"""The transformers engine: left-padded batched generation with a KV cache, on CPU or GPU."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainer.engines.base import Generation, PolicyEngine, SamplingConfig, check_prompt_ids


class HFEngine(PolicyEngine):
    """Any local Hugging Face causal-LM folder. `model` may be passed in to share weights with training."""

    name = "transformers"

    def __init__(self, path: str | Path, device: Optional[str] = None, dtype: Any = None,
                 model: Any = None, tokenizer: Any = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trainer.policy_model import resolve_policy

        self.path = resolve_policy(str(path))
        self.model_ref = str(self.path)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype is None:
            dtype = torch.bfloat16 if self.device.startswith("cuda") else torch.float32
        self.tokenizer = tokenizer or AutoTokenizer.from_pretrained(self.path)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if model is None:  # a model passed in belongs to its owner (training): its mode is left alone
            model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype).to(self.device).eval()
        self.model = model
        self._stop_ids = _stop_ids(self.tokenizer, self.model)

    @property
    def context_length(self) -> Optional[int]:
        return getattr(self.model.config, "max_position_embeddings", None)

    @property
    def eos_token_id(self) -> int:
        return self._stop_ids[0]

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Copy new weights (e.g. from the training model) into the generation model."""
        self.model.load_state_dict(state_dict, strict=False)

    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig) -> list[Generation]:
        import torch
        from transformers import StoppingCriteriaList

        if not check_prompt_ids(prompt_ids, params):
            return []
        pad = self.tokenizer.pad_token_id
        width = max(len(ids) for ids in prompt_ids)
        input_ids = torch.full((len(prompt_ids), width), pad, dtype=torch.long)
        attention = torch.zeros_like(input_ids)
        for row, ids in enumerate(prompt_ids):  # left padding: every prompt ends at the same column
            input_ids[row, width - len(ids):] = torch.tensor(ids)
            attention[row, width - len(ids):] = 1
        greedy = params.temperature == 0
        if params.seed is not None:
            torch.manual_seed(params.seed)
        stop = _StopOnEvent(self.stop_event) if self.stop_event is not None else None
        with torch.inference_mode():
            out = self.model.generate(
                stopping_criteria=StoppingCriteriaList([stop]) if stop else None,
                input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                do_sample=not greedy, temperature=None if greedy else params.temperature,
                top_p=None if greedy else params.top_p, top_k=0 if not greedy else None,
                max_new_tokens=params.max_new_tokens, eos_token_id=self._stop_ids, pad_token_id=pad,
                use_cache=True, return_dict_in_generate=True, output_scores=True,
            )
        new = out.sequences[:, width:].cpu()
        # Processed scores (temperature and top-p applied) -> log-probs of the sampled ids (see base.py).
        scores = torch.stack(out.scores, dim=1).float().cpu()
        logprobs = torch.log_softmax(scores, dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
        results = []
        for row, ids in enumerate(prompt_ids):
            sampled = new[row].tolist()
            end = next((i + 1 for i, t in enumerate(sampled) if t in self._stop_ids), None)
            finish = "stop" if end is not None else "length"
            sampled = sampled[:end] if end is not None else sampled
            results.append(Generation(
                text=self.tokenizer.decode(sampled, skip_special_tokens=True), token_ids=sampled,
                logprobs=logprobs[row, :len(sampled)].tolist(), prompt_ids=list(ids), finish_reason=finish))
        return results


class _StopOnEvent:
    """Stopping criterion: every row is done as soon as `event` is set (Stop pressed)."""

    def __init__(self, event: Any):
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool, device=input_ids.device)


def _stop_ids(tokenizer: Any, model: Any) -> list[int]:
    """End-of-turn ids: the tokenizer's EOS first, then any extra EOS of the generation config."""
    ids = [tokenizer.eos_token_id]
    extra = getattr(model.generation_config, "eos_token_id", None)
    for t in (extra if isinstance(extra, list) else [extra]):
        if t is not None and t not in ids:
            ids.append(t)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(im_end, int) and im_end != tokenizer.unk_token_id and im_end not in ids:
        ids.append(im_end)
    return [i for i in ids if i is not None]
