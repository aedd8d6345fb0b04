"""Which message fates a session keeps (workflows/policy/fates.py)."""

from __future__ import annotations

from agentlane.messages import FateState, MessageFate
from workflows.policy.fates import KEEP_MAX, KEEP_SETTLED, forgotten, kept
from workflows.policy.queue import DEDUPE_TTL_SECONDS


def fate(
    seq: int, state: FateState = FateState.STARTED, at: float = 0.0, mid: str | None = None
) -> MessageFate:
    return MessageFate(seq=seq, state=state, at=at, message_id=mid)


def test_the_newest_settled_and_every_pending_fate_are_kept() -> None:
    pending = [fate(n, FateState.PENDING) for n in (1, 2)]
    settled = [fate(n) for n in range(3, 3 + KEEP_SETTLED + 50)]
    out, let_go = kept([*pending, *settled], now=10_000.0)
    assert [f.seq for f in out] == [1, 2, *[f.seq for f in settled[-KEEP_SETTLED:]]]
    assert let_go == settled[49].seq


def test_a_fate_a_redelivery_may_still_name_is_kept_beyond_the_newest() -> None:
    now = 10_000.0
    old_with_id = fate(1, at=now - DEDUPE_TTL_SECONDS - 1, mid="a")
    recent_with_id = fate(2, at=now - 10, mid="b")
    recent_without = fate(3, at=now - 10)
    rest = [fate(n, at=now) for n in range(4, 4 + KEEP_SETTLED)]
    out, let_go = kept([old_with_id, recent_with_id, recent_without, *rest], now)
    assert [f.seq for f in out][:1] == [2] and len(out) == KEEP_SETTLED + 1
    assert let_go == 3


def test_the_kept_fates_never_exceed_the_bound_in_a_burst_of_ids() -> None:
    now = 10_000.0
    burst = [fate(n, at=now, mid=f"m{n}") for n in range(1, 3 * KEEP_MAX)]
    out, let_go = kept(burst, now)
    assert len(out) == KEEP_MAX and out[-1].seq == burst[-1].seq
    assert let_go == burst[-KEEP_MAX - 1].seq


def test_nothing_is_let_go_while_few_settled() -> None:
    fates = [fate(n) for n in range(1, 11)]
    assert kept(fates, 0.0) == (fates, 0)


def test_only_a_let_go_message_without_a_fate_is_forgotten() -> None:
    answer = forgotten(5, None, let_go_through=7)
    assert answer is not None and answer.state == FateState.FORGOTTEN and "#5" in answer.note
    assert forgotten(8, None, let_go_through=7) is None  # not settled yet, or never let go
    assert forgotten(5, fate(5), let_go_through=7) is None


def test_a_fate_is_settled_once_known_and_not_pending() -> None:
    from workflows.policy.fates import settled

    assert not settled(None)
    assert not settled(MessageFate(seq=1, state=FateState.PENDING))
    for state in FateState:
        if state != FateState.PENDING:
            assert settled(MessageFate(seq=1, state=state)), state
