"""What a causal LM's forward does to the LM head's output before its logits, read from the model's config.

The learner's log-probs apply the head to the decoder's final hidden states a chunk at a time
(trainer.learning.head_logprobs), so they skip the model's own forward after the decoder. Most architectures
return head(hidden) as the logits; some do more, and training must do the same or its log-probs are those of
another model (a tiny Gemma-2 with a softcap of 30 is off by tens of nats):

- a final softcap, logits = cap * tanh(logits / cap): `final_logit_softcapping` (Gemma-2/3/3n/4, VaultGemma,
  nanochat, ...), `logits_soft_cap` (RecurrentGemma);
- a constant factor: Cohere's `logit_scale` (times), Granite's `logits_scaling` (divided by),
  HyperCLOVA X's `logits_scaling` (times), MiniCPM3's hidden_size / `dim_model_base` (divided by), Falcon-H1's `lm_head_multiplier` (times), MuseGlimmer's
  `output_multiplier` (times, before its softcap).

`logit_processing` reads them (a config.json dict or a transformers config); a config that carries one of these
settings for an architecture not listed here is refused in one line naming the setting (`model_problem`, which
the training config's check calls). Whatever the config says, `forward_mismatch` compares the head's processed
output with the forward's own logits where the learner has both (the last position of every forward it runs),
so an architecture that processes its logits some other way is refused at its first step, never trained wrong.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # torch stays unimported for the training config's check
    from torch import Tensor

SOFTCAP_SETTINGS = ("final_logit_softcapping", "logits_soft_cap")
# model_type -> (the setting, True: the logits are multiplied by it, False: divided)
SCALE_SETTINGS = {
    **{t: ("logit_scale", True) for t in ("cohere", "cohere2", "cohere2_moe")},
    **{t: ("logits_scaling", False) for t in ("granite", "granite_swa", "granitemoe", "granitemoe_swa",
                                               "granitemoehybrid", "granitemoeshared")},
    "minicpm3": ("dim_model_base", True),  # hidden / (hidden_size / dim_model_base) before a bias-free head
    "hyperclovax": ("logits_scaling", True),
    "falcon_h1": ("lm_head_multiplier", True),
    "muse_glimmer": ("output_multiplier", True),
}
KNOWN_SCALE_NAMES = sorted({name for name, _ in SCALE_SETTINGS.values()})


@dataclass(frozen=True)
class LogitProcessing:
    """logits = softcap(scale x head(hidden)), softcap(z) = cap tanh(z / cap) when `softcap` is set."""

    scale: float = 1.0
    softcap: Optional[float] = None

    @property
    def identity(self) -> bool:
        return self.scale == 1.0 and self.softcap is None

    def apply(self, logits: Tensor) -> Tensor:
        """The processing on float logits (out of place)."""
        z = logits * self.scale if self.scale != 1.0 else logits
        return (z / self.softcap).tanh() * self.softcap if self.softcap else z


def _settings(config: Any) -> dict[str, Any]:
    d = config if isinstance(config, dict) else config.to_dict()
    text = d.get("text_config") or {}
    return {**(text if isinstance(text, dict) else {}), **d}


def logit_processing(config: Any) -> LogitProcessing:
    """The processing a model's forward applies to head(hidden) (module docstring), from its config (a
    config.json dict or a transformers PretrainedConfig); ValueError naming the setting when the config carries
    one this lab does not know how to apply for its architecture."""
    d = _settings(config)
    model_type = str(d.get("model_type") or "")
    softcap = None
    for name in SOFTCAP_SETTINGS:
        if d.get(name) is not None:
            softcap = float(d[name])
            if not (math.isfinite(softcap) and softcap > 0):
                raise ValueError(f"{name}: a logit softcap must be a positive number, got {d[name]!r}")
    scale = 1.0
    known = SCALE_SETTINGS.get(model_type)
    if known is not None and d.get(known[0]) is not None:
        value = float(d[known[0]])
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{known[0]}: must be a positive number for {model_type}, got {d[known[0]]!r}")
        scale = value if known[1] else 1.0 / value
        if model_type == "minicpm3":
            scale = value / float(d["hidden_size"])
    for name in KNOWN_SCALE_NAMES:
        if d.get(name) is not None and (known is None or known[0] != name):
            raise ValueError(f"{name}: model type {model_type or '?'} sets {name} = {d[name]!r}, which may change "
                             f"its logits in a way the learner's log-probs do not apply; not trainable here")
    return LogitProcessing(scale, softcap)


def model_problem(folder: str | Path) -> Optional[str]:
    """The one-line reason a model folder's config cannot be trained with the learner's log-probs, or None."""
    path = Path(folder) / "config.json"
    try:
        logit_processing(json.loads(path.read_text()))
    except ValueError as exc:
        return str(exc)
    except (OSError, json.JSONDecodeError):
        return None  # the folder's own checks name a missing or broken config.json
    return None


def forward_mismatch(processed: Tensor, forward_logits: Tensor, model_type: str) -> Optional[str]:
    """A message when the head's processed output differs from the forward's logits at the same positions by
    more than their precision allows (2% of the largest logit, at least 0.02), else None."""
    a, b = processed.float(), forward_logits.float()
    worst = float((a - b).abs().max()) if a.numel() else 0.0
    bound = 0.02 * max(1.0, float(b.abs().max()) if b.numel() else 1.0)
    if worst <= bound:
        return None
    return (f"model type {model_type or '?'}: the LM head's output differs from the model's own logits by up to "
            f"{worst:.3g} (the forward processes its logits in a way the learner does not apply); not trainable here")
