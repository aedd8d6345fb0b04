"""Which message fates a session keeps (what `wait_started` and a duplicate's receipt read).

A session answered every message's fate from a list of the last 1 000, carried across each
continue-as-new: on a session that has taken a thousand messages that is ~150 KB of state copied
on every fate change, in every hand-over's input and in the worker's memory, for answers nobody
asks for (a sender waits for its message's start within seconds of sending it). Kept now:

- every message not settled yet (`pending`: queued, or retried after an abnormal run end);
- the newest `KEEP_SETTLED` settled ones (a slow sender still gets its answer);
- settled ones with a message id inside the dedupe window, so a redelivery's receipt names the
  message it repeats, up to `KEEP_MAX` in all.

`wait_started` for a message whose fate was let go answers `forgotten` at once, never a wait.

Pure functions over the fates, no I/O, no Temporal import.
"""

from __future__ import annotations

from agentlane.messages import FateState, MessageFate
from workflows.policy.queue import DEDUPE_TTL_SECONDS

KEEP_SETTLED = 100
KEEP_MAX = 1_000


def settled(fate: MessageFate | None) -> bool:
    """What became of the message is known: started, steered, dropped, given up, forgotten...
    (`wait_started` waits for this)."""
    return fate is not None and fate.state != FateState.PENDING


def _dedupable(fate: MessageFate, now: float) -> bool:
    """A redelivery of it may still come (its id is inside the dedupe window)."""
    return fate.message_id is not None and now - (fate.at or 0.0) < DEDUPE_TTL_SECONDS


def kept(fates: list[MessageFate], now: float) -> tuple[list[MessageFate], int]:
    """The fates to keep (in their order, newest last) and the highest seq let go (0: none)."""
    done = [i for i, f in enumerate(fates) if settled(f)]
    newest = set(done[-KEEP_SETTLED:])
    in_window = [i for i in done if i not in newest and _dedupable(fates[i], now)]
    room = max(KEEP_MAX - len(newest), 0)
    keep = newest | set(in_window[max(len(in_window) - room, 0) :])
    out: list[MessageFate] = []
    let_go = 0
    for i, fate in enumerate(fates):
        if not settled(fate) or i in keep:
            out.append(fate)
        else:
            let_go = max(let_go, fate.seq)
    return out, let_go


def forgotten(seq: int, known: MessageFate | None, let_go_through: int) -> MessageFate | None:
    """The answer for a message whose fate was let go; None while it may still be known."""
    if known is not None or seq > let_go_through:
        return None
    return MessageFate(
        seq=seq,
        state=FateState.FORGOTTEN,
        note=(
            f"message #{seq} settled long ago and its fate is no longer kept (a session keeps "
            f"the newest {KEEP_SETTLED} and those of the last {DEDUPE_TTL_SECONDS:.0f} s)"
        ),
    )
