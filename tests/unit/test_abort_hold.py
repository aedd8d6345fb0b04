"""Which run an abort reaches in each window of a message's life (workflows/policy/abort_hold.py):
before its run is made, while it is made or runs, after it ended."""

from __future__ import annotations

from agentlane.messages import QueueMode
from agentlane.run import UserTurn
from agentlane.session import QueuedMessage
from workflows.policy.abort_hold import (
    AbortTarget,
    abort_note,
    abort_target,
    held_run_queue,
    held_upto,
)


def item(seq: int, mode: QueueMode = QueueMode.COLLECT) -> QueuedMessage:
    return QueuedMessage(
        seq=seq, mode=mode, turn=UserTurn(entry_id=f"u{seq}", text=f"m{seq}"), enqueued_at=0.0
    )


def test_before_the_message_is_numbered_the_abort_waits_for_its_run() -> None:
    # A signal (or an update) taken in while a reopened session restores its settings.
    assert abort_target(False, None, [], accepting=1) == AbortTarget.ABOUT_TO_START
    # It becomes the next message: the abort covers it and nothing after it.
    assert held_upto(None, [], message_seq=4) == 5


def test_after_the_started_receipt_and_before_the_run_exists_the_abort_is_held() -> None:
    queue = [item(3)]
    assert abort_target(False, 3, queue, accepting=0) == AbortTarget.ABOUT_TO_START
    assert held_upto(3, queue, message_seq=3) == 3


def test_while_the_run_is_made_or_runs_it_is_signalled() -> None:
    # `running` is the session's in-flight batch or child: set before the child is started.
    assert abort_target(True, None, [], accepting=0) == AbortTarget.RUNNING
    assert abort_target(True, 3, [item(4)], accepting=0) == AbortTarget.RUNNING


def test_after_the_run_ended_there_is_nothing_to_abort_even_with_messages_queued() -> None:
    # The announced message left the queue when its run started; what is queued now was
    # queued behind that run and was never announced as started.
    assert abort_target(False, None, [], accepting=0) == AbortTarget.NOTHING
    assert abort_target(False, 3, [item(4), item(5)], accepting=0) == AbortTarget.NOTHING
    note = abort_note(None, 2, held=False)
    assert note == "nothing to abort: no run is in progress (2 queued message(s) will run)"


def test_the_held_run_takes_only_the_messages_up_to_the_announced_one() -> None:
    # Collect-mode messages queued behind the announced one would be batched with it.
    queue = [item(3), item(4), item(5)]
    covered = held_run_queue(queue, 3)
    assert covered is not None and [q.seq for q in covered] == [3]
    # An interrupt queued in front of it (a later number) runs after the aborted run.
    front = [item(6, QueueMode.INTERRUPT), item(3)]
    covered = held_run_queue(front, 3)
    assert covered is not None and [q.seq for q in covered] == [3]


def test_a_held_abort_whose_message_left_the_queue_covers_no_later_run() -> None:
    assert held_run_queue([item(7)], 5) is None
    assert held_run_queue([], 5) is None
    # The announced message was dropped: held_upto falls back to a number not yet given.
    assert held_upto(3, [item(4)], message_seq=4) == 5


def test_the_receipt_says_which_run_and_what_waits_after_it() -> None:
    assert abort_note("run-1", 0, held=False) == "aborting run-1"
    held = abort_note("run-1", 1, held=True)
    assert held.startswith("aborting run-1 (it was about to start")
    assert held.endswith("; 1 queued message(s) run after it")
