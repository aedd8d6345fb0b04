"""Tool activity contract. Arguments are read from the transcript, not carried in history."""

from __future__ import annotations

from agentlane.tool_catalog import DEFAULT_TOOLS
from agentlane.wire import CompactModel, RunStepInput

TOOL_ACTIVITY_PREFIX = "tool_"
# The tools a run is offered when its request does not say (agentlane/tool_catalog.py).
BASE_TOOLS = DEFAULT_TOOLS


def tool_activity_name(tool: str) -> str:
    return f"{TOOL_ACTIVITY_PREFIX}{tool}"


class ToolCallInput(RunStepInput):
    workspace: str
    tool_call_id: str
    tool_name: str
    exec_timeout_seconds: int = 120


class ToolCallOutcome(CompactModel):
    # Left empty by current activities: the workflow knows which call it scheduled (and the
    # outcome of a local activity is recorded in history without its input).
    tool_call_id: str = ""
    is_error: bool = False
    summary: str = ""
    duration_ms: int = 0
    replayed: bool = False
    # For loop detection (SPEC §14): a short hash of what the call produced.
    outcome_hash: str = ""
