"""A dialogue in flight (DialogueState) and a group's shared opening (SharedOpenings)."""
from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Iterable, Optional

from simulator.personas.profile import Profile
from simulator.user.agent import SimulatedUser, UserTurn
from trainer.policies.base import Generation
from trainer.rollout.types import RolloutSample


@dataclass
class DialogueState:
    """One dialogue while it runs: its simulated user, visible messages, sample and token layout."""

    key: str
    profile: Profile
    group_id: str
    seed: int
    sample: RolloutSample
    agent: Optional[SimulatedUser] = None  # None when it could not be built (the dialogue failed)
    dialogue_id: Optional[int] = None  # given by the recorder
    messages: list[dict] = field(default_factory=list)  # the visible transcript so far
    prompt_ids: list[int] = field(default_factory=list)  # the next policy turn's prompt
    open_segment: list[int] = field(default_factory=list)  # ids of the causal segment being extended
    last_generation: Optional[Generation] = None


class SharedOpenings:
    """With a shared opening, which member of a group speaks (the first one still running) and the opening
    it said, handed to the others (a copy each); without one, every dialogue speaks for itself."""

    def __init__(self, dialogues: Iterable[DialogueState], shared: bool):
        self.leaders: dict[str, DialogueState] = {}
        self.said: dict[str, asyncio.Future] = {}
        if shared:
            for d in dialogues:
                if d.sample.status == "running":
                    self.leaders.setdefault(d.group_id, d)

    def leader(self, d: DialogueState) -> Optional[DialogueState]:
        """The dialogue whose opening `d` adopts, or None when `d` speaks for itself."""
        leader = self.leaders.get(d.group_id)
        return None if leader is None or leader is d else leader

    def _future(self, group_id: str) -> asyncio.Future:
        return self.said.setdefault(group_id, asyncio.get_running_loop().create_future())

    def spoke(self, d: DialogueState, opening: Optional[UserTurn]) -> None:
        """`d` said `opening` (None: it failed)."""
        if self.leaders.get(d.group_id) is d and not self._future(d.group_id).done():
            self._future(d.group_id).set_result(copy.deepcopy(opening))

    async def wait(self, group_id: str) -> Optional[UserTurn]:
        return copy.deepcopy(await asyncio.shield(self._future(group_id)))
