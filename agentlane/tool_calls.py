"""Tool activity contract. Arguments are read from the transcript, not carried in history."""

from __future__ import annotations

from agentlane.wire import CompactModel, RunStepInput

TOOL_ACTIVITY_PREFIX = "tool_"
BASE_TOOLS = ("read", "write", "edit", "exec")


def tool_activity_name(tool: str) -> str:
    return f"{TOOL_ACTIVITY_PREFIX}{tool}"


class ToolCallInput(RunStepInput):
    workspace: str
    tool_call_id: str
    tool_name: str
    exec_timeout_seconds: int = 120
    # The host whose disk holds the workspace (AGENTLANE_WORKSPACES=host), once known: a worker
    # of another host answers `wrong_host` and touches nothing. None: any host may run it.
    host: str | None = None
    # The session's default workspace, made on first use by the host that runs its tools.
    create_workspace: bool = False


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
    # The host that ran the call when workspaces are per host (None: shared workspaces): the
    # session's tools go to that host from then on.
    host: str | None = None
    # Not run: this worker is not on the host the call was meant for (a local attempt on the
    # worker holding the workflow); the call goes to that host's queue instead.
    wrong_host: bool = False
