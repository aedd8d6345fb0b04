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
