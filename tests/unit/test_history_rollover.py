"""When the session and its event stream continue as new (workflows/policy/history_rollover.py)."""

from __future__ import annotations

from workflows.policy.history_rollover import HistoryBounds, rollover_due

BOUNDS = HistoryBounds(events=1000, bytes=512 * 1024)


def test_older_histories_wait_for_the_suggestion_or_their_explicit_limit() -> None:
    assert not rollover_due(length=3999, size=3 << 20, suggested=False)
    assert rollover_due(length=4096, size=1 << 20, suggested=True)
    assert rollover_due(length=20, size=1000, suggested=False, explicit_events=20)
    assert not rollover_due(length=19, size=1000, suggested=False, explicit_events=20)


def test_bounded_histories_roll_over_by_events_or_bytes() -> None:
    assert not rollover_due(length=999, size=400_000, suggested=False, bounds=BOUNDS)
    assert rollover_due(length=1000, size=400_000, suggested=False, bounds=BOUNDS)
    assert rollover_due(length=300, size=512 * 1024, suggested=False, bounds=BOUNDS)
    # A lower explicit limit wins; a higher one is capped by the bound.
    assert rollover_due(length=25, size=1000, suggested=False, explicit_events=25, bounds=BOUNDS)
    assert rollover_due(
        length=1000, size=1000, suggested=False, explicit_events=5000, bounds=BOUNDS
    )
    assert not rollover_due(
        length=999, size=1000, suggested=False, explicit_events=5000, bounds=BOUNDS
    )
