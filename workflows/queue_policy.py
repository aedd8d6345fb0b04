"""What the session does with a message, and how queued messages become runs (SPEC §17).

Pure functions over the session's queue, testable without a server.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agentlane.messages import QueueMode, Routing
from agentlane.run import UserTurn
from agentlane.session import QueuedMessage

COLLECT_HEADER = "[Queued messages while agent was busy]"


class Action(StrEnum):
    RUN_NOW = "run_now"
    STEER = "steer"
    STEER_AND_QUEUE = "steer_and_queue"
    QUEUE = "queue"
    INTERRUPT = "interrupt"


def decide(mode: QueueMode, busy: bool) -> Action:
    """SPEC §17.3, except that nothing is ever dropped."""
    if not busy:
        return Action.RUN_NOW
    if mode == QueueMode.INTERRUPT:
        return Action.INTERRUPT
    if mode == QueueMode.STEER:
        return Action.STEER
    if mode == QueueMode.STEER_BACKLOG:
        return Action.STEER_AND_QUEUE
    return Action.QUEUE


def _route_key(routing: Routing) -> tuple[str | None, ...]:
    return (routing.channel, routing.to, routing.account, routing.thread)


@dataclass(frozen=True)
class Batch:
    """Messages that become one run, and the prompt they become."""

    seqs: list[int]
    turns: list[UserTurn]


def next_batch(queue: list[QueuedMessage]) -> Batch | None:
    """Take the head of the queue; consecutive collect items with the same route merge.

    Collect never merges across different routes (SPEC §20.8): the first item whose route
    differs starts the next batch.
    """
    if not queue:
        return None
    head = queue[0]
    if head.mode != QueueMode.COLLECT:
        return Batch(seqs=[head.seq], turns=[head.turn])
    group = [head]
    for item in queue[1:]:
        if item.mode != QueueMode.COLLECT or _route_key(item.turn.routing) != _route_key(
            head.turn.routing
        ):
            break
        group.append(item)
    if len(group) == 1:
        return Batch(seqs=[head.seq], turns=[head.turn])
    blocks = [COLLECT_HEADER] + [
        f"---\nQueued #{i}\n{item.turn.text}" for i, item in enumerate(group, start=1)
    ]
    merged = UserTurn(
        entry_id=group[-1].turn.entry_id,
        text="\n\n".join(blocks),
        routing=head.turn.routing,
        sender=group[-1].turn.sender,
    )
    return Batch(seqs=[item.seq for item in group], turns=[merged])


def remove(queue: list[QueuedMessage], seqs: list[int]) -> list[QueuedMessage]:
    taken = set(seqs)
    return [item for item in queue if item.seq not in taken]


def debounce_remaining_ms(last_enqueued_at: float, now: float, debounce_ms: int) -> int:
    return max(0, int(debounce_ms - (now - last_enqueued_at) * 1000))
