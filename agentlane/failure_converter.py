"""Failures that read like failures (issue 25): an expected failure carries no stack trace.

The SDK writes the Python traceback of every exception it turns into a failure (and of each
cause in its chain) into history, where the UI shows it on the event's page. For a fault in the
code that is what an engineer needs; for an expected outcome (a provider refused the call, the
model went silent, a run ended in error) it buries the type, reason and message under frames of
the SDK and absolute paths. Expected failures say so: activities raise them with the SDK's
`BENIGN` category (which also keeps the worker from logging them with a traceback), and a run
ends with a `RunOutcomeError`. Everything else keeps its stack trace.
"""

from __future__ import annotations

from temporalio.api.failure.v1 import Failure
from temporalio.converter import DefaultFailureConverter, PayloadConverter
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory


class RunOutcomeError(ApplicationError):
    """How a run that did not succeed ends its workflow (agentlane/run_outcome.py)."""


def expected(exception: BaseException) -> bool:
    if isinstance(exception, RunOutcomeError):
        return True
    return (
        isinstance(exception, ApplicationError)
        and exception.category == ApplicationErrorCategory.BENIGN
    )


def _without_stack_traces(failure: Failure) -> None:
    while True:
        failure.stack_trace = ""
        if not failure.HasField("cause"):
            return
        failure = failure.cause


class QuietFailureConverter(DefaultFailureConverter):
    """The SDK's converter, without stack traces for expected failures and their causes."""

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        super().to_failure(exception, payload_converter, failure)
        if expected(exception):
            _without_stack_traces(failure)
