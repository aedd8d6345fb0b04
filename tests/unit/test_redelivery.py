"""A run that ends abnormally gives its messages back, a bounded number of times (SPEC §17.5:
items are removed only once handled; failed drains are retried, not lost)."""

from __future__ import annotations

from agentlane.messages import QueueMode
from agentlane.run import UserTurn
from agentlane.session import QueuedMessage
from workflows.policy.redelivery import MAX_RUN_ATTEMPTS, after_abnormal_end


def item(seq: int, attempts: int = 0) -> QueuedMessage:
    return QueuedMessage(
        seq=seq,
        mode=QueueMode.COLLECT,
        turn=UserTurn(entry_id=f"u{seq}", text=f"m{seq}"),
        enqueued_at=0.0,
        attempts=attempts,
    )


def test_first_abnormal_end_puts_every_message_back_in_order_and_debounced() -> None:
    out = after_abnormal_end([item(1), item(2)])
    assert [m.seq for m in out.retry] == [1, 2]
    assert all(m.attempts == 1 and m.debounce for m in out.retry)
    assert out.given_up == []


def test_a_message_is_given_up_at_the_limit_and_only_that_one() -> None:
    out = after_abnormal_end([item(1, attempts=MAX_RUN_ATTEMPTS - 1), item(2, attempts=0)])
    assert [m.seq for m in out.given_up] == [1]
    assert out.given_up[0].attempts == MAX_RUN_ATTEMPTS
    assert [m.seq for m in out.retry] == [2]


def test_the_limit_is_a_parameter_and_inputs_are_not_changed() -> None:
    held = [item(1)]
    out = after_abnormal_end(held, max_attempts=1)
    assert [m.seq for m in out.given_up] == [1]
    assert held[0].attempts == 0 and not held[0].debounce


def test_nothing_held_nothing_to_do() -> None:
    out = after_abnormal_end([])
    assert out.retry == [] and out.given_up == []
