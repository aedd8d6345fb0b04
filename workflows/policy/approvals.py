"""Approvals (issue 21; the original's exec approvals, SPEC §13 end: a 120 s timeout): which tool
calls wait for a person's yes, and what each way an approval ends tells the model or the run.

Pure functions over `agentlane.approvals` models; the wait itself is
`workflows/approval_wait.py`. An expiry is reported as expired, never as a denial by a person:
the model (and whoever reads the transcript) must be able to tell "nobody answered" from "no".
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from agentlane.approvals import (
    ARGS_PREVIEW_CHARS,
    ApprovalClosed,
    ApprovalConfig,
    ApprovalOutcome,
    OnTimeout,
    PendingApproval,
)

__all__ = [
    "TimeoutEffect",
    "args_preview",
    "closed_after",
    "decision_problem",
    "denied_text",
    "duration_words",
    "expired_abort_message",
    "expired_text",
    "needs_approval",
    "on_expiry",
]


def needs_approval(tool: str, config: ApprovalConfig) -> bool:
    """Whether a call of `tool` waits for a person: its name (case-insensitive) matches one of
    the `require` globs (`*`, `?`, `[...]` as in shell globs)."""
    name = tool.strip().lower()
    return any(fnmatchcase(name, glob) for glob in config.require)


def args_preview(summary: str) -> str:
    """The call as a person deciding sees it: its one-line summary, cut to a preview."""
    text = " ".join(summary.split())
    if len(text) <= ARGS_PREVIEW_CHARS:
        return text
    return text[: ARGS_PREVIEW_CHARS - 1] + "…"


def duration_words(seconds: float) -> str:
    """120 -> "120 s", 5400 -> "90 min", 7200 -> "2 h"."""
    if seconds < 600 or seconds % 60:
        return f"{seconds:g} s"
    if seconds < 7200 or seconds % 3600:
        return f"{seconds / 60:g} min"
    return f"{seconds / 3600:g} h"


@dataclass(frozen=True)
class TimeoutEffect:
    """What an expired approval does: the outcome reported, and whether the run stops."""

    outcome: ApprovalOutcome
    aborts_run: bool


def on_expiry(config: ApprovalConfig) -> TimeoutEffect:
    return TimeoutEffect(ApprovalOutcome.EXPIRED, config.on_timeout == OnTimeout.ABORT)


def denied_text(tool: str, reason: str, by: str = "") -> str:
    """The tool result the model gets for a call a person refused."""
    who = f" by {by}" if by else " by the user"
    why = f" Reason: {reason.strip()}" if reason.strip() else ""
    return f"Denied{who}: the {tool} call was not run.{why}"


def expired_text(tool: str, timeout_seconds: float) -> str:
    """The tool result the model gets when nobody decided in time (on_timeout = "deny")."""
    return (
        f"Approval expired: nobody approved or denied the {tool} call within "
        f"{duration_words(timeout_seconds)}, so it was not run."
    )


def expired_abort_message(tool: str, timeout_seconds: float) -> str:
    """The run's error when an expiry stops it (on_timeout = "abort")."""
    return (
        f"Approval expired: nobody approved or denied the {tool} call within "
        f"{duration_words(timeout_seconds)}; the run was stopped (tools.approval.on_timeout = "
        '"abort").'
    )


# -- the session's book of approvals -----------------------------------------------------------

# Closed approvals the session remembers, so a late second decision is told what happened.
KEEP_CLOSED = 50


def decision_problem(
    key: str,
    decision_id: str,
    pending: list[PendingApproval],
    closed: list[ApprovalClosed],
    deciding: set[str],
) -> str | None:
    """Why a decision cannot be taken (unknown id, already decided or expired), or None."""
    if decision_id in deciding:
        return f"approval {decision_id} is already being decided"
    if any(p.id == decision_id for p in pending):
        return None
    for c in reversed(closed):
        if c.id == decision_id:
            if c.outcome == ApprovalOutcome.EXPIRED:
                return f"approval {decision_id} has expired (nobody decided in time)"
            if c.outcome == ApprovalOutcome.CANCELLED:
                return f"approval {decision_id} no longer waits: its run stopped"
            return f"approval {decision_id} was already decided: {c.outcome.value}"
    waiting = ", ".join(p.id for p in pending) or "none"
    return (
        f"session {key} has no approval {decision_id!r} (pending: {waiting}; "
        f"`agentlane approvals {key}` lists them)"
    )


def closed_after(
    closed: list[ApprovalClosed], new: list[ApprovalClosed], keep: int = KEEP_CLOSED
) -> list[ApprovalClosed]:
    """The closed list with `new` appended, oldest dropped beyond `keep`."""
    return [*closed, *new][-keep:]
