"""Short builders for transcript entries in the context tests (ids are given, never generated,
so every test reads the same on every run)."""

from __future__ import annotations

from typing import Any

from agentlane.transcript import Role, ToolCall, TranscriptEntry
from agentlane.usage import Usage


def user(entry_id: str, text: str = "hello", **fields: Any) -> TranscriptEntry:
    return TranscriptEntry(id=entry_id, role=Role.USER, ts=1.0, text=text, **fields)


def system(entry_id: str, text: str, **fields: Any) -> TranscriptEntry:
    return TranscriptEntry(id=entry_id, role=Role.SYSTEM, ts=1.0, text=text, **fields)


def call(call_id: str, name: str = "read", **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def assistant(
    entry_id: str,
    text: str = "",
    *calls: ToolCall,
    stop_reason: str | None = None,
    usage: Usage | None = None,
    **fields: Any,
) -> TranscriptEntry:
    return TranscriptEntry(
        id=entry_id,
        role=Role.ASSISTANT,
        ts=1.0,
        text=text,
        tool_calls=list(calls),
        stop_reason=stop_reason or ("tool_use" if calls else "end_turn"),
        usage=usage,
        **fields,
    )


def result(
    call_id: str,
    text: str = "ok",
    *,
    name: str | None = "read",
    is_error: bool = False,
    entry_id: str | None = None,
    **fields: Any,
) -> TranscriptEntry:
    return TranscriptEntry(
        id=entry_id or f"{call_id}:result",
        role=Role.TOOL,
        ts=1.0,
        tool_call_id=call_id,
        tool_name=name,
        text=text,
        is_error=is_error,
        **fields,
    )
