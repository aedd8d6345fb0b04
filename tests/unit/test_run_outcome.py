"""A run's outcome as Temporal records it (agentlane/run_outcome.py) and failures without stack
traces for expected errors (agentlane/failure_converter.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from temporalio.api.failure.v1 import Failure
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from agentlane.data_converter import make_data_converter
from agentlane.errors import ExecutionErrorKind
from agentlane.failure_converter import RunOutcomeError
from agentlane.run import ExecutionError, ExecutionResult, ExecutionStatus, TerminationReason
from agentlane.run_outcome import (
    aborted_error,
    last_run_line,
    outcome_failure,
    result_of_failure,
    said,
)

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


def result(status: ExecutionStatus, error: ExecutionError | None = None) -> ExecutionResult:
    reason = {
        ExecutionStatus.SUCCESS: TerminationReason.NO_TOOL_CALLS,
        ExecutionStatus.ABORTED: TerminationReason.ABORT_SIGNAL,
    }.get(status, TerminationReason.ERROR)
    return ExecutionResult(
        session_key="k",
        run_id="session:k:run:1",
        status=status,
        termination_reason=reason,
        turns=1,
        started_at=T0,
        ended_at=T0,
        error=error,
    )


FAILED = result(
    ExecutionStatus.ERROR,
    ExecutionError(kind=ExecutionErrorKind.RUNTIME_ERROR, message="Could not connect to x"),
)
ABORTED = result(ExecutionStatus.ABORTED, aborted_error("enough", "gateway token ops"))


def raised(err: Exception) -> Exception:
    """The error with a traceback, as the SDK sees one that was raised."""
    try:
        raise err
    except Exception as caught:
        return caught


def test_a_failed_run_carries_its_result_and_reads_as_the_user_reads_it() -> None:
    err = outcome_failure(FAILED, "timeout")
    assert err.type == "timeout" and err.non_retryable
    assert err.message == "Could not connect to x"
    assert result_of_failure(WorkflowFailureError(cause=err)) == FAILED


def test_an_abort_says_who_asked_where_the_ui_shows_it() -> None:
    assert ABORTED.error is not None and ABORTED.error.message == "enough"
    assert said(ABORTED) == "aborted by gateway token ops: enough"
    assert outcome_failure(ABORTED, "aborted").message == "aborted by gateway token ops: enough"
    assert last_run_line(ABORTED, "aborted") == (
        "**session:k:run:1**: aborted (aborted): aborted by gateway token ops: enough"
    )


def test_other_failures_are_not_a_result() -> None:
    assert result_of_failure(WorkflowFailureError(cause=ApplicationError("boom"))) is None
    assert (
        result_of_failure(
            WorkflowFailureError(cause=ApplicationError("x", {"a": 1}, non_retryable=True))
        )
        is None
    )
    succeeded = result(ExecutionStatus.SUCCESS)
    fake = ApplicationError("x", succeeded.model_dump(mode="json"), non_retryable=True)
    assert result_of_failure(WorkflowFailureError(cause=fake)) is None
    assert result_of_failure(None) is None


def test_the_sessions_line_on_a_success_and_a_long_message() -> None:
    assert last_run_line(result(ExecutionStatus.SUCCESS), None) == (
        "**session:k:run:1**: success (no_tool_calls)"
    )
    long = result(
        ExecutionStatus.ERROR,
        ExecutionError(kind=ExecutionErrorKind.TIMEOUT, message="x" * 1000),
    )
    line = last_run_line(long, "timeout")
    assert line.endswith("…") and len(line) < 400


def test_expected_failures_have_no_stack_trace_and_others_keep_theirs(tmp_path: Path) -> None:
    converter = make_data_converter(tmp_path)

    def encoded(err: Exception) -> Failure:
        failure = Failure()
        converter.failure_converter.to_failure(err, converter.payload_converter, failure)
        return failure

    def provider_failure() -> Exception:
        try:
            try:
                raise ConnectionRefusedError("refused")
            except ConnectionRefusedError as cause:
                raise ApplicationError(
                    "timeout from local/down: refused",
                    type="ModelProviderError",
                    non_retryable=True,
                    category=ApplicationErrorCategory.BENIGN,
                ) from cause
        except ApplicationError as err:
            return err

    benign = encoded(provider_failure())
    assert benign.message == "timeout from local/down: refused"
    assert benign.stack_trace == "" and benign.cause.stack_trace == ""
    assert benign.cause.message == "refused"  # the cause is kept, its traceback is not
    assert encoded(raised(outcome_failure(FAILED, "timeout"))).stack_trace == ""
    assert isinstance(outcome_failure(FAILED, "timeout"), RunOutcomeError)
    bug = encoded(raised(ValueError("a bug")))
    assert "raise err" in bug.stack_trace


def test_summary_rows_get_plain_text() -> None:
    from agentlane.ui_text import plain

    assert plain("run `pytest -q`\n and **then** say done") == "run pytest -q and then say done"
    assert plain("x" * 100) == "x" * 79 + "…"


async def test_with_encryption_a_runs_error_is_encrypted_and_still_quiet(tmp_path: Path) -> None:
    import os

    from agentlane.encryption import EncryptionCodec

    codec = EncryptionCodec({"k1": os.urandom(32)}, "k1")
    converter = make_data_converter(tmp_path, codec=codec)
    failure = Failure()
    err = raised(outcome_failure(ABORTED, "aborted"))
    await converter.encode_failure(err, failure)
    # What the server stores: no message, no stack trace, nothing readable.
    assert failure.message == "Encoded failure" and failure.stack_trace == ""
    assert b"gateway token ops" not in failure.SerializeToString()
    decoded = await converter.decode_failure(failure)
    assert decoded.message == "aborted by gateway token ops: enough"
    assert result_of_failure(WorkflowFailureError(cause=decoded)) == ABORTED
