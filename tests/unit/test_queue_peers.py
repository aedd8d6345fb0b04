"""Whether other worker processes serve the queue, from the pollers the server lists."""

from __future__ import annotations

from activities.queue_peers import FRESH_SECONDS, others_polling

NOW = 1_800_000_000.0


def test_only_this_process_polling_is_alone() -> None:
    assert not others_polling([("1@a", NOW), ("1@a", NOW - 1)], "1@a", NOW, FRESH_SECONDS)
    assert not others_polling([], "1@a", NOW, FRESH_SECONDS)


def test_another_process_polling_lately_shares_the_queue() -> None:
    assert others_polling([("1@a", NOW), ("2@a", NOW - 30)], "1@a", NOW, FRESH_SECONDS)
    assert others_polling([("1@b", NOW - 5)], "1@a", NOW, FRESH_SECONDS)  # same pid, other host


def test_a_worker_not_seen_for_longer_than_a_long_poll_has_stopped() -> None:
    assert not others_polling([("2@a", NOW - FRESH_SECONDS - 1)], "1@a", NOW, FRESH_SECONDS)
