"""What a failed model call is called where people read it (workflows/policy/failure_kind.py)."""

from __future__ import annotations

from agentlane.errors import ExecutionErrorKind, ModelFailure, TransportKind
from workflows.policy.failure_kind import failure_label, precise_kind

K = ExecutionErrorKind


def failure(reason: str = "timeout", **kw: object) -> ModelFailure:
    return ModelFailure(reason=reason, message="m", provider="p", model="x", **kw)  # type: ignore[arg-type]


def test_a_server_error_is_not_a_slow_model() -> None:
    for status in (500, 502, 503, 521):
        assert precise_kind(K.TIMEOUT, failure(status=status)) is K.SERVER_ERROR
        assert failure_label(failure(status=status)) == "server_error"


def test_time_running_out_stays_a_timeout() -> None:
    for status in (408, 504, 524, None):
        assert precise_kind(K.TIMEOUT, failure(status=status)) is K.TIMEOUT
    assert failure_label(failure(idle_timed_out=True)) == "timeout"


def test_a_provider_that_cannot_be_reached_says_so() -> None:
    refused = failure(transport=True, transport_kind=TransportKind.CONNECTION_REFUSED)
    cut = failure(transport=True, transport_kind=TransportKind.STREAM_CUT)
    assert precise_kind(K.TIMEOUT, refused) is K.CONNECTION_REFUSED
    assert failure_label(refused) == "connection_refused"
    assert precise_kind(K.TIMEOUT, cut) is K.CONNECTION and failure_label(cut) == "connection"


def test_other_reasons_and_kinds_are_left_as_they_are() -> None:
    assert failure_label(failure("rate_limit", status=429)) == "rate_limit"
    assert failure_label(failure("overloaded", status=529)) == "overloaded"
    assert precise_kind(K.QUOTA_EXCEEDED, failure(status=500)) is K.QUOTA_EXCEEDED
    assert precise_kind(K.TIMEOUT, None) is K.TIMEOUT


def test_an_idle_end_says_whether_the_model_had_begun() -> None:
    from workflows.policy.failure_text import idle_end_text

    silent = idle_end_text("a/b", 10, produced_output=False)
    assert silent.startswith("The model (a/b) did not produce a response before the LLM idle ")
    assert "(10 s without output)" in silent and "`idle_timeout_seconds`" in silent
    stopped = idle_end_text("a/b", 10, produced_output=True)
    assert stopped.startswith("The model (a/b) began to answer, then went silent: no output")
