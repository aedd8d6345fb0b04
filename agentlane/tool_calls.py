"""Tool activity contract. Arguments are read from the transcript, not carried in history."""

from __future__ import annotations

from agentlane.tool_catalog import DEFAULT_TOOLS
from agentlane.wire import CompactModel, RunStepInput

TOOL_ACTIVITY_PREFIX = "tool_"
# The tools a run is offered when its request does not say (agentlane/tool_catalog.py).
BASE_TOOLS = DEFAULT_TOOLS


def tool_activity_name(tool: str) -> str:
    return f"{TOOL_ACTIVITY_PREFIX}{tool}"


def worker_task_queue(base: str, worker_id: str) -> str:
    """The task queue only one worker process polls: calls about a background process it holds
    (`process` poll / write / kill) are routed there."""
    return f"{base}/worker/{worker_id}"


class ToolCallInput(RunStepInput):
    workspace: str
    tool_call_id: str
    tool_name: str
    exec_timeout_seconds: int = 120
    # The worker that held the background process this call is about did not take the call in
    # time (it is gone): the call reports the process lost.
    owner_gone: bool = False
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
    # Written by earlier versions; left out now (the history's event times say it, and the
    # transcript entry and the tool's end event carry it).
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
    # What the call was given and answered, for the Temporal UI (the local activity's marker or
    # the activity's result): at most 1 KB, secrets redacted (agentlane/tool_preview.py). The
    # whole result is in the transcript store.
    preview: str = ""
