"""Busy is not absent: what the task queue's pollers say about its worker."""

from __future__ import annotations

from clients.api import POLLER_FRESH_SECONDS, WorkerPresence


def test_no_poller_listed_is_no_worker() -> None:
    absent = WorkerPresence("tq", None)
    assert not absent.polling
    assert absent.describe() == "no worker polls task queue tq"


def test_a_poller_listed_but_silent_for_long_is_a_stopped_worker() -> None:
    # The server keeps listing a poller for minutes after its last poll.
    stale = WorkerPresence("tq", POLLER_FRESH_SECONDS + 1)
    assert not stale.polling
    assert "no worker polls task queue tq" in stale.describe()
    assert "its worker stopped" in stale.describe()


def test_a_recent_poll_means_a_busy_worker() -> None:
    busy = WorkerPresence("tq", 12.3)
    assert busy.polling
    assert busy.describe() == "a worker polls task queue tq (last poll 12 s ago) but is busy"


def test_a_server_that_cannot_be_asked_never_claims_absence() -> None:
    assert WorkerPresence("tq", None, unknown=True).polling
