"""Policy model references: 'default' (the packaged SmolLM2, simulator.llm.models) or a local folder."""
from __future__ import annotations

import json
from pathlib import Path

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
