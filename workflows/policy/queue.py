"""Inbound queueing while a run is active (SPEC §17; cases T76, T77 of §18.13).

Settings resolution (§17.2), the decision for a new message (§17.3), dedupe and caps at
enqueue (§17.4) and how the queue drains into runs (§17.5), as pure functions over the
session's queue: no I/O, no clock (callers pass workflow time), no Temporal import. Inputs are
never mutated; every function returns new lists and models.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from agentlane.messages import CLIENT_MESSAGE_ID_PREFIX, QueueMode, Routing
from agentlane.queue_drops import DROP_BATCH, DROP_BATCH_CHARS, DropFate, DroppedMessage
from agentlane.queue_settings import (
    DedupeEntry,
    DedupeMode,
    DropPolicy,
    OverflowState,
    QueueConfig,
    QueueOptions,
    QueueSettings,
)
from agentlane.run import UserTurn
from agentlane.session import QueuedMessage

COLLECT_HEADER = "[Queued messages while agent was busy]"
DEDUPE_TTL_SECONDS = 300.0
DEDUPE_MAX_KEYS = 10_000
SUMMARY_LINE_CHARS = 160
# Channels that have no external destination a reply could be routed to (the original's
# INTERNAL_MESSAGE_CHANNEL); any other named channel counts as routable.
INTERNAL_CHANNELS = frozenset({"webchat"})

_T = TypeVar("_T")


# --- §17.2 settings --------------------------------------------------------------------------


def _first(*values: _T | None) -> _T | None:
    return next((v for v in values if v is not None), None)


def _by_channel(table: dict[str, _T], channel: str | None) -> _T | None:
    # The original lowercases the channel before the lookup; config keys are matched the same.
    if not channel or not channel.strip():
        return None
    wanted = channel.strip().lower()
    return next((v for k, v in table.items() if k.strip().lower() == wanted), None)


def resolve_settings(
    inline: QueueOptions | None,
    session: QueueOptions | None,
    config: QueueConfig,
    channel: str | None,
) -> QueueSettings:
    """First defined wins: the message's own options, the session's `/queue` override, the
    per-channel config, the global config (whose fields carry the built-in defaults).

    There are no channel plugins here, so the original's plugin debounce step is absent.
    """
    one = inline or QueueOptions()
    ses = session or QueueOptions()
    mode = _first(one.mode, ses.mode, _by_channel(config.by_channel, channel)) or config.mode
    debounce = _first(
        one.debounce_ms,
        ses.debounce_ms,
        _by_channel(config.debounce_ms_by_channel, channel),
    )
    cap = _first(one.cap, ses.cap)
    return QueueSettings(
        mode=mode,
        debounce_ms=max(0, config.debounce_ms if debounce is None else debounce),
        cap=max(1, config.cap if cap is None else cap),
        drop=_first(one.drop, ses.drop) or config.drop,
        dedupe=_first(one.dedupe, ses.dedupe) or config.dedupe,
    )


# --- §17.3 decision --------------------------------------------------------------------------


class Action(StrEnum):
    RUN_NOW = "run_now"
    STEER = "steer"
    STEER_AND_QUEUE = "steer_and_queue"
    QUEUE = "queue"
    INTERRUPT = "interrupt"


def decide(mode: QueueMode, busy: bool) -> Action:
    """What to do with a new message (SPEC §17.3, T76).

    `busy` is "a run is active or messages are already queued" (the original's queueBusy):
    a message must not overtake earlier queued ones. The original's "heartbeat while active
    → drop" has no counterpart: sessions here receive no heartbeat messages.

    STEER means: steer into the active run, and queue the message if the run does not take it
    (T76: active + steer → enqueue-followup); see `after_steer`.
    """
    if not busy:
        return Action.RUN_NOW
    if mode == QueueMode.INTERRUPT:
        return Action.INTERRUPT
    if mode == QueueMode.STEER:
        return Action.STEER
    if mode == QueueMode.STEER_BACKLOG:
        return Action.STEER_AND_QUEUE
    return Action.QUEUE


def backlog_copy(item: QueuedMessage) -> QueuedMessage:
    """The follow-up half of a steer-backlog message the run took as steering: the same text
    again, as a later run's prompt, under a transcript id of its own. With the steered half's
    id it would be that entry again (an append of an id already there adds nothing), and the
    follow-up run would start with no prompt: its request would end on the model's own last
    answer, which a provider continues (a prefill) or refuses."""
    return item.model_copy(
        update={
            "turn": item.turn.model_copy(update={"entry_id": f"{item.turn.entry_id}:backlog"}),
            "backlog_of": item.turn.entry_id,
        }
    )


def unconsumed_to_requeue(
    unconsumed: Iterable[UserTurn], queue: Iterable[QueuedMessage]
) -> list[UserTurn]:
    """Steering a run ended without taking, to be queued again as follow-ups: all of it but
    the steer-backlog messages whose follow-up half still waits in the queue (it runs them;
    queued again they would run twice)."""
    waiting = {item.backlog_of for item in queue if item.backlog_of is not None}
    return [turn for turn in unconsumed if turn.entry_id not in waiting]


_SEQ_SUFFIX = re.compile(r":m(\d+)$")


def seq_of(entry_id: str) -> int | None:
    """The message number a session gave a turn (its transcript id ends `:m<seq>`), or None
    for one it did not number so (a steer-backlog copy)."""
    found = _SEQ_SUFFIX.search(entry_id)
    return int(found.group(1)) if found else None


def _leading_interrupts(queue: Sequence[QueuedMessage]) -> int:
    count = 0
    while count < len(queue) and queue[count].mode == QueueMode.INTERRUPT:
        count += 1
    return count


def with_interrupt(queue: Sequence[QueuedMessage], item: QueuedMessage) -> list[QueuedMessage]:
    """An interrupt goes to the head of the queue, behind the interrupts already waiting there:
    several sent while the run stops run in the order they were sent (each at the head would
    run the last first)."""
    at = _leading_interrupts(queue)
    return [*queue[:at], item, *queue[at:]]


def interrupt_ahead(queue: Sequence[QueuedMessage], seq: int) -> int | None:
    """The interrupt waiting just ahead of message `seq` at the queue's head (it runs first),
    or None when `seq` is first."""
    for before, item in zip(queue, queue[1:], strict=False):
        if item.seq == seq:
            return before.seq if before.mode == QueueMode.INTERRUPT else None
    return None


def with_requeued(
    queue: Sequence[QueuedMessage], back: Sequence[QueuedMessage]
) -> list[QueuedMessage]:
    """Steering a run ended without taking goes back to the head of the queue, behind the
    interrupts waiting there: an interrupt's message is the one its receipt says runs next."""
    at = _leading_interrupts(queue)
    return [*queue[:at], *back, *queue[at:]]


def after_steer(action: Action, accepted: bool) -> Action | None:
    """After a steer attempt: QUEUE the message, or None when the run took it and nothing
    else is due. Pure steer stops when accepted; steer-backlog queues either way (§17.3 step 3).
    """
    if action == Action.STEER and accepted:
        return None
    return Action.QUEUE


# --- §17.4 dedupe ----------------------------------------------------------------------------


def _message_id(item: QueuedMessage) -> str | None:
    return (item.message_id or "").strip() or None


def _route(routing: Routing) -> tuple[str | None, ...]:
    return (routing.channel, routing.to, routing.account, routing.thread)


def dedupe_key(session_key: str, routing: Routing, message_id: str) -> str:
    """The recent-id cache key: queue key + channel + to + account + thread + message id.

    A digest of the JSON tuple (the original keys by the tuple itself): JSON so no separator
    inside a value can make two routes collide, a digest so 10 000 keys stay small in the
    session state that continue-as-new carries.
    """
    parts = [
        "queue",
        session_key,
        routing.channel or "",
        routing.to or "",
        routing.account or "",
        routing.thread or "",
        message_id.strip(),
    ]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def recent_key(item: QueuedMessage, session_key: str, dedupe: DedupeMode) -> str | None:
    """The key to `remember` once `item` is accepted; None when nothing is to be remembered."""
    message_id = _message_id(item)
    if dedupe == DedupeMode.NONE or message_id is None:
        return None
    return dedupe_key(session_key, item.turn.routing, message_id)


def _fresh(entry: DedupeEntry, now: float) -> bool:
    return now - entry.at < DEDUPE_TTL_SECONDS


def check_duplicate(
    queue: list[QueuedMessage],
    recent: list[DedupeEntry],
    item: QueuedMessage,
    session_key: str,
    dedupe: DedupeMode,
    now: float,
    client_ids_by_text: bool = False,
) -> bool:
    """Is `item` a duplicate to reject (SPEC §17.4)?

    With a message id: seen in the last 5 minutes on the same route (even if the queue has
    drained since), or queued now with the same id and the same route. Without one, only
    `prompt` mode looks further: identical text and route already queued. As in the original,
    a message that has a channel's id is never compared by text; one whose id a client made up
    (`client_ids_by_text`; False: sessions recorded before) has none.
    """
    key = recent_key(item, session_key, dedupe)
    if key is not None:
        if any(entry.key == key and _fresh(entry, now) for entry in recent):
            return True
        message_id = _message_id(item)
        route = _route(item.turn.routing)
        if any(_message_id(q) == message_id and _route(q.turn.routing) == route for q in queue):
            return True
        made_up = (message_id or "").startswith(CLIENT_MESSAGE_ID_PREFIX)
        if not (client_ids_by_text and made_up):
            return False
    if dedupe == DedupeMode.PROMPT:
        route = _route(item.turn.routing)
        return any(q.turn.text == item.turn.text and _route(q.turn.routing) == route for q in queue)
    return False


def remember(recent: list[DedupeEntry], key: str, now: float) -> list[DedupeEntry]:
    """Record an accepted key: expired entries go, the key moves to the newest end, and only
    the newest 10 000 are kept."""
    kept = [entry for entry in recent if entry.key != key and _fresh(entry, now)]
    kept.append(DedupeEntry(key=key, at=now))
    return kept[-DEDUPE_MAX_KEYS:]


# --- §17.4 cap and drop policy -----------------------------------------------------------------


@dataclass(frozen=True)
class CapOutcome:
    accept_new: bool
    queue: list[QueuedMessage]
    overflow: OverflowState
    dropped: list[QueuedMessage]


def summary_line(text: str) -> str:
    """A dropped message as one summary line: whitespace collapsed, at most 160 chars."""
    cleaned = " ".join(text.split())
    if len(cleaned) <= SUMMARY_LINE_CHARS:
        return cleaned
    return cleaned[: SUMMARY_LINE_CHARS - 1].rstrip() + "…"


def apply_cap(
    queue: list[QueuedMessage],
    overflow: OverflowState,
    cap: int,
    drop: DropPolicy,
    in_flight: Collection[int] = (),
    by_age: bool = False,
) -> CapOutcome:
    """Make room for one more message before it is added (SPEC §17.4).

    Items whose seq is in `in_flight` (a run holds them) neither count nor are dropped.
    `new` rejects the newcomer; `old` drops the oldest waiting items; `summarize` drops the
    same and remembers one line per dropped item, keeping only the newest `cap` lines.
    `by_age`: the oldest are the lowest message numbers, accepted interrupts last (they sit at
    the queue's head, where the oldest were taken from: an interrupt just accepted, its receipt
    saying it stops the run, was dropped while older follow-ups ran).
    """
    cap = max(1, cap)
    waiting = [item for item in queue if item.seq not in in_flight]
    if len(waiting) < cap:
        return CapOutcome(True, list(queue), overflow, [])
    if drop == DropPolicy.NEW:
        return CapOutcome(False, list(queue), overflow, [])
    if by_age:
        waiting = sorted(waiting, key=lambda item: (item.mode == QueueMode.INTERRUPT, item.seq))
    victims = waiting[: len(waiting) - cap + 1]
    gone = {item.seq for item in victims}
    kept = [item for item in queue if item.seq not in gone]
    if drop == DropPolicy.SUMMARIZE:
        lines = [*overflow.lines, *(summary_line(item.turn.text) for item in victims)]
        overflow = OverflowState(dropped=overflow.dropped + len(victims), lines=lines[-cap:])
    return CapOutcome(True, kept, overflow, victims)


def drop_fate(drop: DropPolicy) -> DropFate:
    """What a message dropped under `drop` became: counted in the next overflow summary
    (summarize), or dropped with no trace in a prompt (old, new). Its text is kept either way."""
    return DropFate.SUMMARIZED if drop == DropPolicy.SUMMARIZE else DropFate.DROPPED


def drops_to_record(
    pending: list[DroppedMessage], max_items: int = DROP_BATCH, max_chars: int = DROP_BATCH_CHARS
) -> list[DroppedMessage]:
    """The oldest pending dropped messages to record in one go: at most `max_items`, and no
    more text than `max_chars` together (always at least one), so one batch stays a small
    payload however long the messages."""
    batch: list[DroppedMessage] = []
    chars = 0
    for item in pending[:max_items]:
        if batch and chars + len(item.text) > max_chars:
            break
        batch.append(item)
        chars += len(item.text)
    return batch


def overflow_summary(overflow: OverflowState | None) -> str | None:
    """The summary of dropped messages, or None when nothing was dropped.

    One line per dropped message for the newest `cap` of them (SPEC §17.4 keeps only those);
    when more were dropped, a last line says how many are not listed and where their texts
    are, so the prompt stays bounded and nothing is silently missing.
    """
    if overflow is None or overflow.dropped <= 0:
        return None
    n = overflow.dropped
    lines = [f"[Queue overflow] Dropped {n} message{'' if n == 1 else 's'} due to cap."]
    if overflow.lines:
        lines.append("Summary:")
        lines.extend(f"- {line}" for line in overflow.lines)
    unlisted = n - len(overflow.lines)
    if unlisted > 0:
        one = unlisted == 1
        lines.append(
            f"- … and {unlisted} earlier dropped message{'' if one else 's'} not listed here "
            f"({'its full text is' if one else 'their full texts are'} kept in the session's "
            "transcript)"
        )
    return "\n".join(lines)


# --- §17.5 drain -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batch:
    """Messages that become one run, and the prompt they become.

    `used_overflow`: the prompt carries the overflow summary of `carried_dropped` messages;
    once the run ended, only those leave the summary (`overflow_after_run`).
    `one_by_one`: keep passing `one_by_one=True` to `next_batch` until the queue is empty.
    """

    seqs: list[int]
    turns: list[UserTurn]
    used_overflow: bool = False
    one_by_one: bool = False
    carried_dropped: int = 0


def overflow_after_run(overflow: OverflowState, carried_dropped: int) -> OverflowState:
    """What the overflow summary still owes once a run that carried `carried_dropped` of its
    drops ended: the messages dropped while that run ran (each dropped message adds one line,
    the newest last), for the next run's prompt."""
    added = overflow.dropped - carried_dropped
    if added <= 0:
        return OverflowState()
    return OverflowState(dropped=added, lines=overflow.lines[-added:])


def _unrouted(routing: Routing) -> bool:
    return not (routing.channel or routing.to or routing.account or routing.thread)


def _routable(channel: str | None) -> bool:
    return bool(channel and channel.strip()) and (
        (channel or "").strip().lower() not in INTERNAL_CHANNELS
    )


def is_cross_channel(items: Iterable[QueuedMessage]) -> bool:
    """Can these items not share one prompt without losing where replies go?

    Cross-channel: an item with a named but unroutable channel or without a destination `to`;
    items whose channel|to|account|thread differ; or routed items mixed with unrouted ones.
    Items that all have no routing at all (a CLI session) are not: they collect.
    """
    keys: set[tuple[str | None, ...]] = set()
    unrouted = False
    for item in items:
        routing = item.turn.routing
        if _unrouted(routing):
            unrouted = True
            continue
        if not _routable(routing.channel) or not routing.to:
            return True
        keys.add(_route(routing))
    return bool(keys) and (unrouted or len(keys) > 1)


def _collect_head(queue: list[QueuedMessage]) -> list[QueuedMessage]:
    group: list[QueuedMessage] = []
    for item in queue:
        if item.mode != QueueMode.COLLECT:
            break
        group.append(item)
    return group


def _first_routing(items: list[QueuedMessage]) -> Routing:
    routes = [item.turn.routing for item in items]
    return Routing(
        channel=next((r.channel for r in routes if r.channel), None),
        to=next((r.to for r in routes if r.to), None),
        account=next((r.account for r in routes if r.account), None),
        thread=next((r.thread for r in routes if r.thread), None),
    )


def _collected(
    items: list[QueuedMessage], summary: str | None, one_by_one: bool, carried: int = 0
) -> Batch:
    blocks = [COLLECT_HEADER]
    if summary is not None:
        blocks.append(summary)
    blocks += [f"---\nQueued #{i}\n{q.turn.text}".strip() for i, q in enumerate(items, 1)]
    turn = UserTurn(
        entry_id=items[-1].turn.entry_id,
        text="\n\n".join(blocks),
        routing=_first_routing(items),
        sender=items[-1].turn.sender,
    )
    return Batch(
        seqs=[q.seq for q in items],
        turns=[turn],
        used_overflow=summary is not None,
        one_by_one=one_by_one,
        carried_dropped=carried if summary is not None else 0,
    )


def _alone(item: QueuedMessage, one_by_one: bool) -> Batch:
    return Batch(seqs=[item.seq], turns=[item.turn], one_by_one=one_by_one)


def next_batch(
    queue: list[QueuedMessage],
    overflow: OverflowState | None = None,
    one_by_one: bool = False,
) -> Batch | None:
    """The next run's messages and prompt, taken from the head of the queue (SPEC §17.5).

    Collect head: the consecutive collect items at the head are the candidate batch. If it is
    cross-channel (`is_cross_channel`), or the drain already went one by one, the head item
    runs alone and the drain stays one by one. Otherwise one prompt: the header, the overflow
    summary if any, then "---\\nQueued #i\\n<text>" per item; routing takes the first
    non-empty value of each field, entry id and sender come from the last item. A lone
    collect item with no summary is sent as it is.

    Other heads: with an overflow summary pending, the head item carries the summary: its
    prompt is the summary, then "---", then the item's own text (routing, entry id and sender
    from that item). The original sends the summary alone and the item's text is lost
    (issue 25); otherwise the item runs as its own turn.
    """
    if not queue:
        return None
    summary = overflow_summary(overflow)
    carried = overflow.dropped if overflow is not None else 0
    head = queue[0]
    if head.mode != QueueMode.COLLECT:
        if summary is None:
            return _alone(head, one_by_one)
        turn = head.turn.model_copy(update={"text": f"{summary}\n\n---\n{head.turn.text}"})
        return Batch(
            [head.seq],
            [turn],
            used_overflow=True,
            one_by_one=one_by_one,
            carried_dropped=carried,
        )
    group = _collect_head(queue)
    if one_by_one or is_cross_channel(group):
        # The original runs the item alone and leaves the summary for an item-less prompt
        # after the queue empties; here it rides with this item so it has an entry and a route.
        if summary is None:
            return _alone(head, True)
        return _collected([head], summary, one_by_one=True, carried=carried)
    if len(group) == 1 and summary is None:
        return _alone(head, one_by_one)
    return _collected(group, summary, one_by_one, carried)


def remove(queue: list[QueuedMessage], seqs: list[int]) -> list[QueuedMessage]:
    taken = set(seqs)
    return [item for item in queue if item.seq not in taken]


def item_debounce_ms(item: QueuedMessage, default_ms: int) -> int:
    """How long the queue must be quiet before `item` runs: 0 unless it was queued behind a
    busy run; then the debounce resolved at its enqueue, else the session's."""
    if not item.debounce:
        return 0
    return max(0, default_ms if item.debounce_ms is None else item.debounce_ms)


def debounce_remaining_ms(last_enqueued_at: float, now: float, debounce_ms: int) -> int:
    return max(0, int(debounce_ms - (now - last_enqueued_at) * 1000))
