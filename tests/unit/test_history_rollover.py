"""When the session and its event stream continue as new (workflows/policy/history_rollover.py)."""

from __future__ import annotations

from workflows.policy.history_rollover import HistoryBounds, rollover_due

BOUNDS = HistoryBounds(events=1000, bytes=512 * 1024)


def rest() -> bool:
    return True


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


def test_at_rest_half_the_bounds_suffice() -> None:
    assert rollover_due(length=500, size=1000, suggested=False, bounds=BOUNDS, at_rest=rest)
    assert rollover_due(length=10, size=256 * 1024, suggested=False, bounds=BOUNDS, at_rest=rest)
    assert not rollover_due(length=499, size=1000, suggested=False, bounds=BOUNDS, at_rest=rest)
    assert not rollover_due(length=500, size=1000, suggested=False, bounds=BOUNDS)
    # Halfway from where the history began: the state carried into it does not count.
    began = HistoryBounds(events=10, bytes=112 * 1024)

    def due(length: int, size: int) -> bool:
        return rollover_due(
            length=length, size=size, suggested=False, bounds=BOUNDS, at_rest=rest, began=began
        )

    assert not due(100, 200 * 1024)
    assert due(100, (112 + 200) * 1024)
    assert due(505, 120 * 1024)
    # Histories recorded before the bounds keep their old rule.
    assert not rollover_due(length=3000, size=1000, suggested=False, at_rest=rest)


def test_whether_at_rest_is_asked_only_past_halfway() -> None:
    asked: list[int] = []

    def resting() -> bool:
        asked.append(1)
        return False

    for length in range(0, 499, 7):
        assert not rollover_due(
            length=length, size=1000, suggested=False, bounds=BOUNDS, at_rest=resting
        )
    assert asked == []
    assert not rollover_due(length=600, size=1000, suggested=False, bounds=BOUNDS, at_rest=resting)
    assert asked == [1]


def test_the_hand_over_at_rest_waits_for_the_run_to_settle() -> None:
    """Within the server's minimal interval between two runs of one id, a hand-over would only
    hold the next run back: the one at rest (by choice) waits; the bounds and Temporal's own
    suggestion do not."""
    for settled in (False, True):
        assert (
            rollover_due(
                length=600,
                size=1000,
                suggested=False,
                bounds=BOUNDS,
                at_rest=lambda: True,
                settled=settled,
            )
            is settled
        )
        assert rollover_due(length=1000, size=1000, suggested=False, bounds=BOUNDS, settled=settled)
        assert rollover_due(length=10, size=10, suggested=True, bounds=BOUNDS, settled=settled)
