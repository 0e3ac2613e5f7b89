"""A per-reply signal fitted to people: a ridge-regressed score of each reply from sentence embeddings, added to a
calibrated simulator's change (the second level of a calibration, simulator.user.calibration).

Per reply the features are three all-MiniLM-L6-v2 blocks (the model the offline simulator already loads) and a
constant: what the user has said so far (the mean of their messages' embeddings), the reply, and the reply's
embedding times the user's last message's (elementwise: does it answer this message). The points are
w . features + b, in emotion points of one reply; the weights are fitted by simulator.fitting.reply_signal_fit.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

FEATURES = "minilm-said-reply-answer-v1"  # the feature layout below; a new layout gets a new name
DIM = 384  # all-MiniLM-L6-v2's width
_BATCHER: Any = None  # one embedding batcher for every dialogue's replies (it keeps a queue per event loop)


def feature_texts(said: Sequence[str], reply: str) -> list[str]:
    """The texts whose embeddings make one reply's features: the user's messages so far, then the reply."""
    return [s for s in said if s.strip()] + [reply]


def features_from(vectors: np.ndarray) -> np.ndarray:
    """One reply's features from the embeddings of feature_texts (the user's messages, then the reply)."""
    said, reply = vectors[:-1], vectors[-1]
    mean_said = said.mean(axis=0) if len(said) else np.zeros(DIM, dtype=np.float32)
    last = said[-1] if len(said) else np.zeros(DIM, dtype=np.float32)
    return np.concatenate([mean_said, reply, reply * last, [1.0]]).astype(np.float64)


def reply_features(said: Sequence[str], reply: str) -> np.ndarray:
    from simulator.llm.embedding import embed_sync

    return features_from(embed_sync(feature_texts(said, reply)))


@dataclass(frozen=True)
class ReplySignal:
    """Fitted weights over the features above (the last one the constant), with the ridge penalty chosen."""

    weights: list[float]
    features: str = FEATURES
    alpha: float = 0.0

    def __post_init__(self) -> None:
        if self.features != FEATURES:
            raise ValueError(f"reply_signal.features: {self.features!r} is not a layout this lab computes "
                             f"({FEATURES})")
        if len(self.weights) != 3 * DIM + 1:
            raise ValueError(f"reply_signal.weights: {len(self.weights)} values, the layout has {3 * DIM + 1}")

    def points(self, features: np.ndarray) -> float:
        return float(np.asarray(self.weights) @ features)

    async def score(self, said: Sequence[str], reply: str) -> float:
        """The points of one reply, the embeddings batched with other dialogues' (simulator.llm.embedding)."""
        global _BATCHER
        if _BATCHER is None:
            from simulator.llm.embedding import EmbedBatcher

            _BATCHER = EmbedBatcher()
        vectors = await _BATCHER.embed(feature_texts(said, reply))
        return self.points(features_from(np.asarray(vectors)))

    def hash(self) -> str:
        body = json.dumps({"f": self.features, "w": [round(w, 9) for w in self.weights]})
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ReplySignal":
        return cls(weights=[float(w) for w in d["weights"]], features=str(d.get("features", FEATURES)),
                   alpha=float(d.get("alpha", 0.0)))
