"""What a failure is called and said in where people read it: kinds and labels
(workflows/policy/failure_kind.py), the idle end, a compaction that cannot help."""

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


def test_a_server_error_said_inside_a_stream_is_a_server_error() -> None:
    # Anthropic's `api_error` event, an OpenAI chunk's `server_error`: no status to show it.
    for code in ("api_error", "server_error"):
        assert precise_kind(K.TIMEOUT, failure(code=code)) is K.SERVER_ERROR
        assert failure_label(failure(code=code)) == "server_error"
    assert precise_kind(K.TIMEOUT, failure(code="api_error", idle_timed_out=True)) is K.TIMEOUT


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


def test_compaction_that_cannot_help_names_the_entry_in_the_way() -> None:
    from activities.context.compaction import nothing_to_compact_text
    from agentlane.transcript import Role, TranscriptEntry

    pasted = TranscriptEntry(id="k.m2", role=Role.USER, ts=1.0, text="word " * 40_000)
    short = TranscriptEntry(id="k.m3", role=Role.USER, ts=2.0, text="say hi")
    text = nothing_to_compact_text([pasted, short], 8_000)
    assert text.startswith("nothing before the most recent turns to summarise: they alone take")
    assert "of a 8000-token budget, the largest a user entry of about" in text
    assert " tokens (k.m2)" in text
    assert "(k.m2)" in text and "`agentlane reset`" in text
    # Turns that fit by this engine's estimate: the provider counted more, nothing to blame.
    assistant = TranscriptEntry(id="k.a1", role=Role.ASSISTANT, ts=3.0, text="ok")
    text = nothing_to_compact_text([short, assistant], 8_000)
    assert "within the 8000-token budget, but the provider counts them as more" in text
    assert "largest" not in text
