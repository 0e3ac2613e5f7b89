"""A stop on degenerate repetition: a reply whose recent tokens keep repeating the same few n-grams.

A small policy that never samples its end-of-turn token usually falls into a loop (the same sentence, or the
same token, again and again). In a window of the last `window` sampled tokens, normal text has nearly every
`n`-gram distinct; a loop of period p has only p distinct ones. The stop fires when at most `max_share` of
the window's n-grams are distinct, i.e. within about `window` tokens of a loop of period <= window / 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

WINDOW = 200
NGRAM = 6
MAX_SHARE = 0.5


@dataclass(frozen=True)
class RepetitionRule:
    window: int = WINDOW
    n: int = NGRAM
    max_share: float = MAX_SHARE

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "ngram": self.n, "max_distinct_share": self.max_share}


def is_degenerate(ids: Sequence[int], rule: RepetitionRule = RepetitionRule()) -> bool:
    """Whether the last `rule.window` ids are a loop (see the module docstring); False while shorter."""
    if len(ids) < rule.window:
        return False
    tail = list(ids[-rule.window:])
    grams = [tuple(tail[i:i + rule.n]) for i in range(len(tail) - rule.n + 1)]
    return len(set(grams)) <= rule.max_share * len(grams)


class RepetitionStop:
    """A transformers stopping criterion, row by row: a row stops once its reply is degenerate, and the
    number of tokens it had then is kept in `fired` (row -> length) so the engine can cut it there."""

    def __init__(self, prompt_width: int, rule: RepetitionRule = RepetitionRule()):
        self.prompt_width, self.rule = prompt_width, rule
        self.fired: dict[int, int] = {}

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        generated = input_ids.shape[1] - self.prompt_width
        if generated < self.rule.window or (generated % 8 and generated > self.rule.window):
            return done  # check every 8 tokens once long enough: a loop found 8 tokens late costs little
        for row in range(input_ids.shape[0]):
            if row in self.fired:
                done[row] = True
            elif is_degenerate(input_ids[row, self.prompt_width:].tolist(), self.rule):
                self.fired[row] = generated
                done[row] = True
        return done
