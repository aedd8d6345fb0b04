"""Checks every way in shares before a message is accepted (`check_inbound`), and the client's
per-message queue options."""

from __future__ import annotations

import pytest

from agentlane.messages import MAX_MESSAGE_CHARS, InboundMessage, check_inbound
from agentlane.queue_settings import DropPolicy, QueueOptions
from clients.api import _queue_options


def test_valid_message_passes() -> None:
    check_inbound(InboundMessage(text="hi", mode="coalesce"))


@pytest.mark.parametrize(
    ("msg", "words"),
    [
        (InboundMessage(text="   "), "empty"),
        (InboundMessage(text="x" * (MAX_MESSAGE_CHARS + 1)), "the limit is 100000"),
        (InboundMessage(text="hi", mode="sideways"), "unknown queue mode 'sideways'"),
    ],
)
def test_bad_messages_are_refused_with_a_reason(msg: InboundMessage, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        check_inbound(msg)


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValueError):
        InboundMessage.model_validate({"text": "hi", "priority": 1})


def test_per_message_queue_options_from_words() -> None:
    options = _queue_options("debounce:0 cap:5 drop:oldest")
    assert options == QueueOptions(debounce_ms=0, cap=5, drop=DropPolicy.OLD)
    assert _queue_options(None) is None
    with pytest.raises(ValueError, match="reset"):
        _queue_options("reset")


def test_a_retried_send_that_got_through_reports_its_acceptance() -> None:
    from agentlane.messages import FateState, MessageFate, QueueMode, SendDisposition, SendReceipt
    from clients.api import _own_duplicate

    original = MessageFate(seq=4, state=FateState.STARTED, run_id="r2", message_id="m")
    dup = SendReceipt(
        session_key="k",
        message_seq=9,
        disposition=SendDisposition.DUPLICATE,
        mode=QueueMode.COLLECT,
        duplicate_of=4,
        original=original,
    )
    mine = _own_duplicate(dup)
    assert (mine.message_seq, mine.disposition, mine.run_id) == (4, SendDisposition.STARTED, "r2")
    queued = _own_duplicate(
        dup.model_copy(update={"original": original.model_copy(update={"state": "pending"})})
    )
    assert queued.disposition == SendDisposition.QUEUED
    plain = dup.model_copy(update={"original": None, "duplicate_of": None})
    assert _own_duplicate(plain) == plain


def test_only_load_aborted_updates_and_retried_tasks_are_retried() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from clients.api import _retryable

    assert _retryable(RPCError("busy", RPCStatusCode.RESOURCE_EXHAUSTED, b""))
    assert _retryable(RPCError("workflow update was aborted", RPCStatusCode.UNAVAILABLE, b""))
    assert not _retryable(RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b""))
    # A session whose workflow task is being retried takes the update once a task succeeds.
    not_ready = "Unable to perform workflow execution update due to Workflow Task in failed state."
    assert _retryable(RPCError(not_ready, RPCStatusCode.FAILED_PRECONDITION, b""))
    assert not _retryable(RPCError("other", RPCStatusCode.FAILED_PRECONDITION, b""))
    assert not _retryable(RPCError("nope", RPCStatusCode.INVALID_ARGUMENT, b""))


def test_text_that_is_not_utf8_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="not valid UTF-8"):
        check_inbound(InboundMessage(text="caf\udce9 ok"))
