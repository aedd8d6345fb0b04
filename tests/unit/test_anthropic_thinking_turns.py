"""With thinking on, Anthropic takes a tool-use turn only if it starts with the model's signed
thinking: a turn another provider made (a fallback mid-loop) is finished without thinking."""

from __future__ import annotations

import time

from activities.providers.anthropic_request import THINKING_META_KEY, build_messages_body
from activities.providers.base import ModelRequest
from agentlane.transcript import Role, ToolCall, TranscriptEntry


def entry(role: Role, n: int, **kw: object) -> TranscriptEntry:
    return TranscriptEntry(id=f"e{n}", role=role, ts=time.time(), **kw)  # type: ignore[arg-type]


CALL = ToolCall(id="call-1", name="write", arguments={"path": "a.txt", "content": "x"})


def body(entries: list[TranscriptEntry]) -> dict[str, object]:
    request = ModelRequest(model="claude", system="s", entries=entries, tools=[], thinking="low")
    return build_messages_body(request, max_tokens=1000)


def test_an_unsigned_tool_use_turn_is_finished_without_thinking() -> None:
    entries = [
        entry(Role.USER, 1, text="write a.txt"),
        entry(Role.ASSISTANT, 2, text="", tool_calls=[CALL]),  # made by an OpenAI model
        entry(Role.TOOL, 3, text="ok", tool_call_id="call-1"),
    ]
    got = body(entries)
    assert "thinking" not in got and got["max_tokens"] == 1000


def test_a_signed_turn_and_a_new_user_turn_keep_thinking() -> None:
    signed = entry(
        Role.ASSISTANT,
        2,
        text="",
        tool_calls=[CALL],
        meta={THINKING_META_KEY: [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
    )
    tool = entry(Role.TOOL, 3, text="ok", tool_call_id="call-1")
    assert "thinking" in body([entry(Role.USER, 1, text="go"), signed, tool])
    unsigned = entry(Role.ASSISTANT, 2, text="", tool_calls=[CALL])
    later = entry(Role.ASSISTANT, 4, text="done")
    new_turn = entry(Role.USER, 5, text="and now?")
    assert "thinking" in body([entry(Role.USER, 1, text="go"), unsigned, tool, later, new_turn])
