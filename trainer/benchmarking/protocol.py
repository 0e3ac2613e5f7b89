"""The benchmark protocol (SAGE's test_npc.py as the lab runs it): its rules, the policy's system prompt, the
per-reply cap of local engines, and the record every eval run keeps. Runs whose `protocol_hash` differ are
never ranked together. `config` is a trainer.benchmarking.benchmark.BenchmarkConfig.
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional

from simulator.llm.hashing import canonical_json
from simulator.user.packs import load_pack
from simulator.user.rules import RULE_SETS, EmotionRules
from trainer.policies.repetition import RepetitionRule
from trainer.rollout.templates import system_prompt
from trainer.rollout.types import SEED_RULE

PROTOCOL_RULES = "standard"  # simulator.user.rules.RULE_SETS; recorded under "preset" (the hash stays)
PROTOCOL_VERSION = "sage-test_npc-1"
# The safety cap on a local policy's reply: above the longest reply in the published SAGE transcripts in any
# tokenizer at hand (2,504 characters; 3,654 SmolLM2 tokens, whose byte-level vocabulary spends ~1.5 tokens on
# a Chinese character), so no published reply would have been cut (docs/evaluation.md has the measurement).
LOCAL_REPLY_CAP = 4096


def protocol_rules() -> EmotionRules:
    return RULE_SETS[PROTOCOL_RULES]


def policy_system_prompt(config: Any, language: str) -> str:
    """The benchmark policy's system prompt: the pack's in direct mode (the `own` pack's is the lab's wording
    of the one-line role SAGE gives its policy), the lab's think template in think mode."""
    pack = load_pack(config.prompt_pack)
    if config.mode == "think" or pack is None:
        return system_prompt(config.mode, language)
    return pack.policy_system_prompt(language)


def reply_cap(config: Any, local: bool) -> Optional[int]:
    """The per-reply cap as resolved for the policy: the config's, else LOCAL_REPLY_CAP for a local engine."""
    return config.max_new_tokens or (LOCAL_REPLY_CAP if local else None)


def protocol_record(config: Any, languages: list[str], context_length: Optional[int],
                    local: bool = False) -> dict[str, Any]:
    """What the protocol was, recorded on every eval run; runs whose `protocol_hash` differ are never ranked
    together. The caps are as resolved for the policy (None = none); `local`: the policy is a local engine
    (its reply cap and repetition stop apply; API and replay policies have neither)."""
    prompts = {lang: policy_system_prompt(config, lang) for lang in sorted(set(languages))}
    record = {"version": PROTOCOL_VERSION, "preset": PROTOCOL_RULES, "first_line": "scripted",
              "rules": protocol_rules().to_dict(), "end_words": "再见 / 拜拜; bye / goodbye (whole word)",
              "policy_system_prompts": prompts,
              "policy_system_prompt_sha256": {k: hashlib.sha256(v.encode("utf-8")).hexdigest()[:16]
                                              for k, v in prompts.items()},
              "max_new_tokens": reply_cap(config, local),
              "max_tokens": config.max_tokens or context_length,
              "dialogue_seed": SEED_RULE}  # by (run seed, persona, repeat): a resumed run plays the same dialogues
    if local and config.stop_on_repetition:  # absent otherwise, so earlier API and replay runs keep their hash
        record["stop_on_repetition"] = RepetitionRule().to_dict()
    record["protocol_hash"] = hashlib.sha256(canonical_json(record).encode("utf-8")).hexdigest()[:16]
    return record
