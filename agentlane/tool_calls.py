"""Tool activity contract. Arguments are read from the transcript, not carried in history."""

from __future__ import annotations

from agentlane.wire import CompactModel

TOOL_ACTIVITY_PREFIX = "tool_"
BASE_TOOLS = ("read", "write", "edit", "exec")


def tool_activity_name(tool: str) -> str:
    return f"{TOOL_ACTIVITY_PREFIX}{tool}"


class ToolCallInput(CompactModel):
    session_key: str
    run_id: str
    turn_index: int
    workspace: str
    assistant_entry_id: str
    tool_call_id: str
    tool_name: str
    exec_timeout_seconds: int = 120


class ToolCallOutcome(CompactModel):
    tool_call_id: str
    is_error: bool
    summary: str
    duration_ms: int
    replayed: bool = False
