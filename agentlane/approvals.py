"""Approvals that wait durably (issue 21): contracts shared by the config, the session, the run
and the clients.

`[tools.approval]` names the tools whose calls need a person's yes. A run about to dispatch such
a call waits on a durable timer (a workflow `wait_condition`, no worker slot held) until someone
decides through the session (`SessionWorkflow.decide_approval`), or until the approval expires.
The rules are `workflows/policy/approvals.py`; the wait is `workflows/approval_wait.py`.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentlane.events import Announcement
from agentlane.wire import RunStepInput

DEFAULT_TIMEOUT_SECONDS = 120
# A week: longer than any run's budget (48 h by default) is pointless but harmless.
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
# How much of a call's arguments an approval shows (status, events, CLI): a preview.
ARGS_PREVIEW_CHARS = 300


class OnTimeout(StrEnum):
    # The call is not run; the model gets a tool result saying the approval expired.
    DENY = "deny"
    # The run is stopped (aborted), saying the approval expired.
    ABORT = "abort"


class ApprovalConfig(BaseModel):
    """`[tools.approval]` of config.toml."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Globs over tool names (`exec`, `write*`, `*`); empty: no call waits.
    require: list[str] = Field(default_factory=list)
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT_SECONDS, gt=0, le=MAX_TIMEOUT_SECONDS)
    on_timeout: OnTimeout = OnTimeout.DENY

    @field_validator("require")
    @classmethod
    def _globs(cls, globs: list[str]) -> list[str]:
        for glob in globs:
            if not glob.strip():
                raise ValueError("an empty tool name in `require`")
        return [g.strip().lower() for g in globs]


class ApprovalOutcome(StrEnum):
    APPROVED = "approved"
    DENIED = "denied"
    # Nobody decided in time (never reported as "denied by user").
    EXPIRED = "expired"
    # The run stopped (abort, budget) while it waited.
    CANCELLED = "cancelled"


class PendingApproval(BaseModel):
    """One call waiting for a decision, as the session lists it."""

    id: str
    run_id: str
    tool_call_id: str
    tool: str
    # What the call would do, cut to a preview (`ARGS_PREVIEW_CHARS`).
    args_preview: str = ""
    requested_at: float
    expires_at: float
    on_timeout: OnTimeout = OnTimeout.DENY
    # Set when a sub-agent's run waits: its session (`agent:<id>:subagent:<uuid>`) and the
    # top-level run it belongs to. The approval is listed and decided in the top-level session.
    session_key: str = ""
    root_run_id: str = ""


class ApprovalDecision(BaseModel):
    """What a person decided (`agentlane approve`, the gateway, the web chat)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=100)
    approve: bool
    reason: str = Field(default="", max_length=2000)
    # Who decided, as the client names them (shown in the tool result and the event).
    by: str = Field(default="", max_length=200)


class ApprovalClosed(BaseModel):
    """The run's word to the session that an approval no longer waits, and why."""

    id: str
    outcome: ApprovalOutcome
    reason: str = ""


class ApprovalReceipt(BaseModel):
    """The answer to a decision: what became of the approval."""

    id: str
    outcome: ApprovalOutcome
    tool: str
    # Set when the decision lost a race (the approval expired or the run stopped first).
    note: str = ""


# -- the run's one activity about an approval ------------------------------------------------

APPROVAL_STEP = "approval_step"


class ApprovalStepInput(RunStepInput):
    """Publish the approval's events now (the run is about to wait, or has just been decided)
    and, for a call that will not run, write its tool result (`answer`) to the transcript."""

    tool_call_id: str
    tool_name: str
    announce: list[Announcement] = Field(default_factory=list)
    # Empty: the call runs (or waits); nothing is written.
    answer: str = ""
    summary: str = ""
    # A sub-agent's approval: its events also go to this (top-level) session's stream, where
    # people and webhooks watch.
    notify_session_key: str = ""
