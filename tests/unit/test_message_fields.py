"""A message's fields: no NUL byte anywhere, short fields within the search attribute limit
(issue 19), refused with the field's name before any workflow call."""

from __future__ import annotations

import re

import pytest

from agentlane.messages import (
    MAX_FIELD_BYTES,
    InboundMessage,
    Routing,
    check_fields,
    check_inbound,
)


@pytest.mark.parametrize(
    ("msg", "words"),
    [
        (InboundMessage(text="a\x00b"), "text contains a NUL byte (\\0) at character 1"),
        (InboundMessage(text="hi", workspace="ws\x00"), "workspace contains a NUL"),
        (InboundMessage(text="hi", routing=Routing(thread="t\x00")), "routing.thread contains"),
        (InboundMessage(text="hi", agent_id="main\x00"), "agent_id contains"),
        (
            InboundMessage(text="hi", routing=Routing(channel="c" * 100_000)),
            f"routing.channel is 100000 bytes; the limit is {MAX_FIELD_BYTES}",
        ),
        (
            InboundMessage(text="hi", routing=Routing(account="é" * 1100)),
            "routing.account is 2200 bytes",
        ),
        (InboundMessage(text="hi", workspace="w" * 5000), "workspace is 5000 characters"),
    ],
)
def test_bad_fields_are_named(msg: InboundMessage, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        check_fields(msg)
    with pytest.raises(ValueError):
        check_inbound(msg)


def test_fields_at_the_limit_pass() -> None:
    check_inbound(
        InboundMessage(
            text="hi", routing=Routing(channel="c" * MAX_FIELD_BYTES), sender="s" * MAX_FIELD_BYTES
        )
    )
