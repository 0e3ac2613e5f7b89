"""DialogueRecorder: writes a rollout's dialogues and turns to the store as they happen.

The dialogue rollout (trainer.rollout.dialogue_rollout) knows nothing of the store; it tells its recorder (the
trainer.rollout.types.RolloutRecorder contract) when a dialogue starts, each turn and when it ends, and
this class turns that into Dialogue and Turn rows through storage.dialogues.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Optional

from sqlalchemy import Engine

from storage import dialogues


class DialogueRecorder:
    """One short write transaction per call, so a crash loses at most the turn in flight. `start` and
    `sample` are the rollout's DialogueStart and RolloutSample, read by attribute (storage imports nothing
    from the trainer)."""

    def __init__(self, store: Engine):
        self.store = store
        self._silent: set[int] = set()  # training dialogues in which the policy has not spoken yet

    def dialogue_started(self, start: Any) -> int:
        cfg = start.config
        dialogue_id = dialogues.start_dialogue(
            self.store, persona_id=start.profile.id, persona_snapshot=start.profile.to_dict(), source=cfg.source,
            policy_ref=start.policy_ref, mode=cfg.mode, simulator_fingerprint=start.simulator_fingerprint,
            fingerprint_hash=start.fingerprint_hash, job_id=cfg.job_id, step=cfg.step,
            eval_run_id=cfg.eval_run_id, group_id=start.group_id, seed=start.seed,
            config={"rollout": asdict(cfg), "policy": start.policy})
        if cfg.source == "train":
            self._silent.add(dialogue_id)
        return dialogue_id

    def turn_recorded(self, dialogue_id: Optional[int], turn: dict[str, Any]) -> None:
        if turn["role"] == "assistant":
            self._silent.discard(dialogue_id)
        fields = {k: v for k, v in turn.items() if k not in ("role", "index", "text", "done")}
        dialogues.add_turn(self.store, dialogue_id, turn["index"], turn["role"], turn["text"], **fields)

    def dialogue_finished(self, dialogue_id: Optional[int], sample: Any) -> None:
        """A training dialogue cancelled before any policy reply is dropped (a cancelled job left 32 empty
        dialogues in Transcripts); every other dialogue is kept as it ended."""
        if sample.status == "cancelled" and dialogue_id in self._silent:
            self._silent.discard(dialogue_id)
            dialogues.drop_dialogue(self.store, dialogue_id)
            return
        self._silent.discard(dialogue_id)
        dialogues.finish_dialogue(self.store, dialogue_id, sample.status, sample.final_emotion,
                                  outcome=sample.outcome, error=sample.error)
