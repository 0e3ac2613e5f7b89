"""The policy-engine interface shared by the transformers, vLLM and OpenAI engines.

An engine turns a batch of chat histories into replies. Local engines also take token ids directly
(`generate_ids`), which the dialogue rollout uses so that every turn's prompt is built from the ids the
policy actually sampled earlier, never from re-tokenised text.

Log-probabilities: `Generation.logprobs[i]` is log p(token_ids[i]) under the distribution the token was
sampled from: softmax(logits / T), renormalised over the top-p nucleus (transformers: the processed
scores; vLLM: logprobs_mode="processed_logprobs"). With top_p = 1 (the training setting) this is exactly
log_softmax(logits / T)[token], which training recomputes by dividing its logits by the same temperature,
so the PPO ratio is 1 at the start of an update whose weights have not changed. Greedy (T = 0): the raw
log_softmax(logits).

Seeds: `params.seed` seeds a whole call; `seeds` (one per prompt) makes each prompt's sample depend on its
own seed only, not on which prompts share its batch, so a rollout that batches whatever is ready samples
the same replies as one that batches in rounds (up to float rounding of the logits: the transformers
engine pads rows differently in different batches; vLLM batches continuously anyway).
"""
from __future__ import annotations

import abc
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from simulator.llm.models import default_model_dir

# what a policy spec may be (trainer.policies.spec reads them); the one wording of every message about it
POLICY_FORMS = ("'default', a model folder (or transformers:PATH), a training checkpoint folder, "
                "'vllm:PATH|default', 'openai:MODEL' or 'replay:FILE'")


def resolve_policy(spec: str) -> Path:
    """'default' -> the SmolLM2 cache folder; a path -> that folder, checked to be a causal LM."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"policy must be {POLICY_FORMS}")
    if spec == "default":
        return default_model_dir()
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"policy model folder {str(path)!r} not found")
    config_file = path / "config.json"
    if not config_file.exists():
        raise ValueError(f"policy folder {str(path)!r} has no config.json: not a Hugging Face model folder")
    try:
        config = json.loads(config_file.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"policy folder {str(path)!r}: config.json is not valid JSON ({exc})") from None
    archs = config.get("architectures") or []
    if not any(a.endswith("ForCausalLM") or a.endswith("LMHeadModel") for a in archs):
        raise ValueError(f"policy folder {str(path)!r} is not a causal LM "
                         f"(architectures: {', '.join(archs) or 'none'})")
    if not any((path / f).exists() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise ValueError(f"policy folder {str(path)!r} has no tokenizer files")
    return path


LOGPROB_CONVENTION = "log_softmax(logits / temperature) over the top-p nucleus"


@dataclass
class SamplingConfig:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: Optional[int] = 256  # None: no cap (API engines only; local ones get a budget)
    seed: Optional[int] = None

    def validate(self) -> "SamplingConfig":
        errs = []
        if not isinstance(self.temperature, (int, float)) or self.temperature < 0:
            errs.append(f"temperature must be >= 0, got {self.temperature!r}")
        if not isinstance(self.top_p, (int, float)) or not 0 < self.top_p <= 1:
            errs.append(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.max_new_tokens is not None and (not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1):
            errs.append(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        if errs:
            raise ValueError("; ".join(errs))
        return self

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Generation:
    """One reply. token_ids/logprobs/prompt_ids are empty for API engines (no token access)."""

    text: str
    token_ids: list[int] = field(default_factory=list)  # sampled ids, including a final EOS when sampled
    logprobs: list[float] = field(default_factory=list)  # one per sampled id (see LOGPROB_CONVENTION)
    prompt_ids: list[int] = field(default_factory=list)  # the ids the reply was conditioned on
    # stop (EOS sampled) | length (max_new_tokens hit) | repetition (a degenerate loop, trainer.policies.repetition)
    # | error
    finish_reason: str = "stop"
    error: str = ""
    policy_version: Optional[int] = None  # updates the sampling weights had seen (trainer.policies.versioned)


class PolicyEngine(abc.ABC):
    """generate(prompts, params) -> one Generation per chat history, in order."""

    name: str = "engine"
    model_ref: str = ""
    supports_token_ids: bool = True
    tokenizer: Any = None
    # Set by the dialogue rollout to its Stop flag (a threading.Event): engines that can, end a batch early.
    stop_event: Any = None
    # Set by the dialogue rollout when its config stops replies on degenerate repetition (a RepetitionRule):
    # local engines end (transformers) or flag (vLLM) a reply that loops
    repetition_rule: Any = None
    # Set by a UI that shows replies as they are sampled: called as token_listener(keys, ids) after each
    # decoding step (the transformers engine's static path: every few steps), `ids` the tokens so far of every
    # row of the batch and `keys` whose turn each row is (batch_keys, set by the scheduler). Engines that can
    # call it (the transformers engine); others never.
    token_listener: Any = None
    batch_keys: Optional[list[str]] = None

    @abc.abstractmethod
    def generate_ids(self, prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> list[Generation]:
        """Sample one continuation per prompt given as token ids (`seeds`: one per prompt, see above)."""

    @property
    def context_length(self) -> Optional[int]:
        """Tokens the model can attend to (prompt + reply), or None when unknown (API engines)."""
        return None

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        """The chat-template text of a history (validates roles and contents)."""
        check_messages(messages)
        return self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    def encode_chat(self, messages: list[dict]) -> list[int]:
        """Token ids of a history rendered with the chat template, ending with the assistant header."""
        return self.tokenizer(self.render(messages), add_special_tokens=False)["input_ids"]

    def encode_text(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def eos_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    def generate(self, prompts: list[list[dict]], params: SamplingConfig,
                 seeds: Optional[list[int]] = None) -> list[Generation]:
        """Render each chat history with the chat template and sample a reply."""
        return self.generate_ids([self.encode_chat(p) for p in prompts], params, seeds)

    def describe(self) -> dict[str, Any]:
        """What produced a result: engine kind and model reference (stored with every dialogue)."""
        return {"engine": self.name, "model": self.model_ref, "logprobs": LOGPROB_CONVENTION}

    def forget_caches(self) -> None:
        """Drop what the engine keeps between calls that its weights produced (the transformers engine's KV
        caches kept between a dialogue's turns): called before the weights change in place. A no-op for most."""

    def close(self) -> None:
        """Free resources (vLLM workers); a no-op for most engines."""


def check_messages(messages: Any) -> None:
    """Raise ValueError naming the problem when a chat history is malformed."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("prompt must be a non-empty list of {'role', 'content'} messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise ValueError(f"message {i}: role must be system, user or assistant, got {m!r:.80}")
        if not isinstance(m.get("content"), str):
            raise ValueError(f"message {i}: content must be text")


def check_prompt_ids(prompt_ids: list[list[int]], params: SamplingConfig,
                     seeds: Optional[list[int]] = None) -> bool:
    """Validate a generate_ids call; False when there is nothing to generate."""
    params.validate()
    if any(not ids for ids in prompt_ids):
        raise ValueError("every prompt needs at least one token")
    if seeds is not None and len(seeds) != len(prompt_ids):
        raise ValueError(f"seeds: {len(seeds)} seeds for {len(prompt_ids)} prompts")
    return bool(prompt_ids)
