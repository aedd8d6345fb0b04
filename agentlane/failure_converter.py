"""Failures that read like failures (issue 25): an expected failure carries no stack trace.

The SDK writes the Python traceback of every exception it turns into a failure (and of each
cause in its chain) into history, where the UI shows it on the event's page. For a fault in the
code that is what an engineer needs; for an expected outcome (a provider refused the call, the
model went silent, a run ended in error) it buries the type, reason and message under frames of
the SDK and absolute paths. Expected failures say so: activities raise them with the SDK's
`BENIGN` category (which also keeps the worker from logging them with a traceback), and a run
ends with a `RunOutcomeError`. Everything else keeps its stack trace.

With payload encryption on, failures' messages and stack traces go into an encoded attribute
the codec encrypts (the SDK's `encode_common_attributes`): a run's error message can quote the
user, and the UI shows it through the codec server like any payload.
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


def _drop_tracebacks(exception: BaseException) -> None:
    """The exception and its causes lose their tracebacks (the converter writes what is left:
    messages, types, details). It is being reported, never raised again."""
    seen: set[int] = set()
    err: BaseException | None = exception
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        err.__traceback__ = None
        err = err.__cause__ or (None if err.__suppress_context__ else err.__context__)


class QuietFailureConverter(DefaultFailureConverter):
    """The SDK's converter, without stack traces for expected failures and their causes."""

    def to_failure(
        self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure
    ) -> None:
        if expected(exception):
            _drop_tracebacks(exception)
        super().to_failure(exception, payload_converter, failure)


class QuietEncodedFailureConverter(QuietFailureConverter):
    """The same, with messages and stack traces encoded (and so encrypted) by the codec."""

    def __init__(self) -> None:
        super().__init__(encode_common_attributes=True)
