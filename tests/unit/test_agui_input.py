"""What a `RunAgentInput` sends to a session (clients/gateway/agui_transport.py, issue 19)."""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import RunAgentInput

from clients.gateway.agui_transport import AguiInputError, message_of


def run(**over: Any) -> RunAgentInput:
    body: dict[str, Any] = {
        "threadId": "web:alice",
        "runId": "r1",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [
            {"id": "u1", "role": "user", "content": "first"},
            {"id": "a1", "role": "assistant", "content": "reply"},
            {"id": "u2", "role": "user", "content": "the new one"},
        ],
    }
    body.update(over)
    return RunAgentInput.model_validate(body)


def test_the_last_user_message_is_sent_with_its_id_and_props() -> None:
    got = message_of("web:alice", run(forwardedProps={"mode": "steer", "model": "x/y", "z": 1}))
    assert (got.text, got.message_id, got.mode, got.model) == ("the new one", "u2", "steer", "x/y")
    parts = [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]
    got = message_of("web:alice", run(messages=[{"id": "u", "role": "user", "content": parts}]))
    assert got.text == "a b" and got.mode is None and got.model is None


def test_thinking_and_reasoning_ride_in_forwarded_props() -> None:
    """Review R F-R8: they were ignored on the AG-UI route (bad values accepted too); they go to
    the session as the message body's fields, whose checks refuse bad values."""
    got = message_of("web:alice", run(forwardedProps={"thinking": "high", "reasoning": "stream"}))
    assert (got.thinking, got.reasoning) == ("high", "stream")
    with pytest.raises(AguiInputError, match="forwardedProps.reasoning must be a string"):
        message_of("web:alice", run(forwardedProps={"reasoning": 1}))


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"threadId": "web:bob"}, "threadId 'web:bob' is not this session"),
        ({"messages": []}, "messages is empty"),
        (
            {"messages": [{"id": "t", "role": "tool", "toolCallId": "c", "content": "x"}]},
            "the last message is a tool message",
        ),
        (
            {
                "messages": [
                    {
                        "id": "u",
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "url",
                                    "value": "https://x/y.png",
                                    "mimeType": "image/png",
                                },
                            }
                        ],
                    }
                ]
            },
            "only text is taken",
        ),
        ({"forwardedProps": {"mode": 3}}, "forwardedProps.mode must be a string"),
    ],
)
def test_what_cannot_be_run_says_why(over: dict[str, Any], words: str) -> None:
    with pytest.raises(AguiInputError, match=words):
        message_of("web:alice", run(**over))
