"""A run's outcome as Temporal records it (issue 25).

A run that ends in error, or is aborted, ends its workflow *Failed*: an `ApplicationError` whose
type is the error's label (what `AgentLastError` says: the provider failure's reason, else the
error kind, `aborted` for an abort), whose message is the text the user reads, non-retryable,
with the run's `ExecutionResult` as its only detail. The UI's status column, its Failures
filter, `ExecutionStatus='Failed'` and every alert on failed workflows then tell the truth.

Whoever read the run's result before (the session, a sub-agent's parent, `wait_for_run`) reads
it from that detail: `result_of_failure`. A failure without one (terminated, timed out, a bug)
is an abnormal end, as before.

Why not Temporal's *Canceled* for an abort: the SDK ends a workflow Canceled only when Temporal
itself asked for the cancel, and the cancel command carries no details, so the run's result
(its reply so far, usage, the steering it did not take) would be lost to the session.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from agentlane.errors import ExecutionErrorKind
from agentlane.failure_converter import RunOutcomeError
from agentlane.run import ExecutionError, ExecutionResult, ExecutionStatus, TerminationReason


def outcome_failure(result: ExecutionResult, error_type: str) -> RunOutcomeError:
    """The failure a run that did not succeed ends its workflow with (no stack trace:
    agentlane/failure_converter.py)."""
    return RunOutcomeError(
        said(result) or result.status.value,
        result.model_dump(mode="json"),
        type=error_type,
        non_retryable=True,
    )


def result_of_failure(err: BaseException | None) -> ExecutionResult | None:
    """The result a failed run carries (a `ChildWorkflowError`'s or `WorkflowFailureError`'s
    cause), or None when the workflow failed for any other reason."""
    cause = getattr(err, "cause", None)
    if not isinstance(cause, ApplicationError) or not cause.non_retryable:
        return None
    if len(cause.details) != 1 or not isinstance(cause.details[0], dict):
        return None
    try:
        result = ExecutionResult.model_validate(cause.details[0])
    except ValidationError:
        return None
    return result if result.status != ExecutionStatus.SUCCESS else None


def aborted_error(reason: str | None, by: str | None) -> ExecutionError:
    """An abort's error: why (its message, as before), and who asked."""
    return ExecutionError(kind=ExecutionErrorKind.ABORTED, message=reason or "aborted", by=by)


def said(result: ExecutionResult) -> str:
    """How the run's end reads in the UI: the error's message, and for an abort who asked
    ("aborted by agentlane-cli ann@box: user abort")."""
    error = result.error
    if error is None:
        return result.termination_reason.value
    if error.kind == ExecutionErrorKind.ABORTED and error.by:
        return f"aborted by {error.by}: {error.message}"
    return error.message


def last_run_line(result: ExecutionResult, label: str | None, limit: int = 300) -> str:
    """The session's words on its latest run: "**<run id>**: error (connection_refused): <message>";
    `label` is the error's (what AgentLastError and the run's failure type say)."""
    line = f"**{result.run_id}**: {result.status.value}"
    if result.status == ExecutionStatus.SUCCESS or result.error is None:
        return f"{line} ({result.termination_reason.value})"
    message = " ".join(said(result).split())
    if len(message) > limit:
        message = message[: limit - 1] + "…"
    return f"{line} ({label or result.error.kind.value}): {message}"


# `ExecutionError.detail` of a run that Temporal ended (terminated, timed out) without a result:
# its session runs its messages again in its next run, which a waiting client may follow.
ENDED_IN_TEMPORAL = "ended in Temporal"


def ended_in_temporal(
    session_key: str, run_id: str, how: str, why: str, started: datetime, ended: datetime
) -> ExecutionResult:
    """The result a client reads for a run Temporal ended without one (`how`: terminated,
    timed out), instead of the SDK's bare failure."""
    said_why = f": {why}" if why else ""
    return ExecutionResult(
        session_key=session_key,
        run_id=run_id,
        status=ExecutionStatus.ERROR,
        termination_reason=TerminationReason.ERROR,
        started_at=started,
        ended_at=ended,
        error=ExecutionError(
            kind=ExecutionErrorKind.RUNTIME_ERROR,
            message=(
                f"run {run_id} was {how} in Temporal{said_why}; its session runs its messages "
                "again in the next run"
            ),
            detail=ENDED_IN_TEMPORAL,
        ),
    )
