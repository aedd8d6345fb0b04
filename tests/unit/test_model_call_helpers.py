"""The model-call activity's pure helpers: tool-call summaries, the idle limit on a provider
stream, and typed failures from provider errors (SPEC §5)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.liveness import IdleTimeout, with_idle_limit
from activities.model_call import tool_call_summary, typed_failure
from activities.providers.base import (
    Credentials,
    Finish,
    ProviderError,
    StreamEvent,
    TextDelta,
)
from activities.providers.offline import OfflineProvider
from activities.providers.resolve import ResolvedModel
from agentlane.config import ApiKind, ModelEntry
from agentlane.errors import MODEL_PROVIDER_ERROR, ModelFailure, TransportKind
from agentlane.usage import Usage
from workflows.policy.thinking_fallback import pick_fallback_thinking_level

# --- tool_call_summary ---------------------------------------------------------------------------


def test_summary_uses_the_path_or_the_command() -> None:
    assert tool_call_summary("read", {"path": "notes.md"}) == "read notes.md"
    assert tool_call_summary("write", {"path": "a/b.txt", "content": "x" * 500}) == "write a/b.txt"
    assert tool_call_summary("exec", {"command": "ls -la"}) == "exec ls -la"


def test_summary_collapses_whitespace() -> None:
    assert tool_call_summary("exec", {"command": "echo a\n\n  echo   b\t"}) == "exec echo a echo b"


def test_summary_without_the_expected_argument() -> None:
    assert tool_call_summary("read", {}) == "read"
    assert tool_call_summary("exec", {"path": "ignored"}) == "exec"
    assert tool_call_summary("custom", {"path": 42}) == "custom 42"


def test_long_summary_is_cut_to_120_characters() -> None:
    line = tool_call_summary("exec", {"command": "x" * 300})
    assert len(line) <= 120
    assert line.startswith("exec xxx")
    assert line.endswith("…")
    exact = tool_call_summary("exec", {"command": "y" * 115})  # "exec " + 115 = 120
    assert exact == "exec " + "y" * 115


# --- with_idle_limit -----------------------------------------------------------------------------


async def events(gaps: list[float]) -> AsyncIterator[StreamEvent]:
    for n, gap in enumerate(gaps):
        await asyncio.sleep(gap)
        yield TextDelta(str(n))
    yield Finish(stop_reason="end_turn", usage=Usage(input=1, output=2))


async def test_fast_stream_passes_through() -> None:
    got = [e async for e in with_idle_limit(events([0.0, 0.01, 0.0, 0.01]), 1.0)]
    assert got == [
        TextDelta("0"),
        TextDelta("1"),
        TextDelta("2"),
        TextDelta("3"),
        Finish(stop_reason="end_turn", usage=Usage(input=1, output=2)),
    ]


async def test_limit_is_per_gap_not_for_the_whole_stream() -> None:
    # Ten gaps of 0.05 s: 0.5 s in all, each well under the 0.2 s limit.
    got = [e async for e in with_idle_limit(events([0.05] * 10), 0.2)]
    assert len(got) == 11


async def test_stalled_stream_times_out_after_the_limit() -> None:
    received: list[StreamEvent] = []
    started = time.monotonic()
    with pytest.raises(IdleTimeout, match="LLM idle timeout") as info:
        async for event in with_idle_limit(events([0.0, 0.0, 30.0]), 0.2):
            received.append(event)
    elapsed = time.monotonic() - started
    assert received == [TextDelta("0"), TextDelta("1")]
    assert 0.15 <= elapsed < 2.0
    assert "no response from model" in str(info.value)
    assert isinstance(info.value.__cause__, TimeoutError)


async def test_stall_before_the_first_event_times_out() -> None:
    with pytest.raises(IdleTimeout, match=r"\(1s\)"):
        async for _ in with_idle_limit(events([1.5]), 1.0):
            pass


async def test_provider_errors_pass_through_unchanged() -> None:
    async def failing() -> AsyncIterator[StreamEvent]:
        yield TextDelta("partial")
        raise ProviderError("boom", provider="p", model="m", status=500)

    received: list[StreamEvent] = []
    with pytest.raises(ProviderError, match="boom"):
        async for event in with_idle_limit(failing(), 1.0):
            received.append(event)
    assert received == [TextDelta("partial")]


# --- typed_failure -------------------------------------------------------------------------------


@pytest.fixture
def resolved() -> ResolvedModel:
    return ResolvedModel(
        provider=OfflineProvider(),
        model_id="claude-test",
        credentials=Credentials(profile_id="p1", api_key="k"),
        entry=ModelEntry(provider="anthropic", id="claude-test", api=ApiKind.ANTHROPIC),
    )


def failure_of(err: ApplicationError) -> ModelFailure:
    assert err.type == MODEL_PROVIDER_ERROR
    assert len(err.details) == 1
    return ModelFailure.model_validate(err.details[0])


def provider_error(message: str, **kw: object) -> ProviderError:
    return ProviderError(message, provider="anthropic", model="claude-test", **kw)  # type: ignore[arg-type]


def test_rate_limit_with_retry_after(resolved: ResolvedModel) -> None:
    err = typed_failure(
        provider_error("Rate limit exceeded", status=429, retry_after_seconds=12.0),
        resolved,
        "high",
    )
    assert err.non_retryable
    assert err.next_retry_delay is None
    # The headline the UI shows names the reason, status, provider and model.
    assert err.message.startswith("rate_limit (429) from anthropic/claude-test: ")
    failure = failure_of(err)
    assert failure.reason == "rate_limit"
    assert failure.retry_after_seconds == 12.0
    assert failure.status == 429
    assert failure.provider == "anthropic"
    assert failure.model == "claude-test"
    assert failure.profile_id == "p1"
    assert failure.thinking == "high"
    assert failure.raw_message == "Rate limit exceeded"
    assert not failure.transport


def test_a_transport_error_is_the_runs_to_retry(resolved: ResolvedModel) -> None:
    """Issue 24: no Temporal retry; the run waits inside its budget and makes the call again."""
    err = typed_failure(
        provider_error("Connection error.", transport=True, code="ECONNRESET"),
        resolved,
        "off",
        received_chars=0,
    )
    assert err.non_retryable
    assert err.next_retry_delay is None
    failure = failure_of(err)
    assert failure.reason == "timeout", "SPEC §5.2: a transport failure's reason is timeout"
    assert failure.transport and failure.transport_kind is TransportKind.CONNECTION
    assert failure.host == "api.anthropic.com" and failure.received_chars == 0


@pytest.mark.parametrize(
    ("code", "started", "kind"),
    [
        ("ECONNREFUSED", False, TransportKind.CONNECTION_REFUSED),
        ("ECONNRESET", False, TransportKind.CONNECTION),
        ("ETIMEDOUT", False, TransportKind.CONNECTION),
        ("ENOTFOUND", False, TransportKind.CONNECTION),
        ("ECONNRESET", True, TransportKind.STREAM_CUT),
        ("stream_incomplete", True, TransportKind.STREAM_CUT),
    ],
)
def test_transport_kinds(
    resolved: ResolvedModel, code: str, started: bool, kind: TransportKind
) -> None:
    base = dataclasses.replace(
        resolved, entry=resolved.entry.model_copy(update={"base_url": "http://127.0.0.1:9/v1"})
    )
    error = provider_error("x", transport=True, code=code, stream_started=started)
    failure = failure_of(typed_failure(error, base, "off", received_chars=12))
    assert failure.transport_kind is kind
    assert failure.host == "127.0.0.1:9" and failure.received_chars == 12
    assert failure.code == code


def test_a_refused_connection_names_the_url(resolved: ResolvedModel) -> None:
    error = provider_error(
        "Connection error. <- ConnectError: All connection attempts failed",
        transport=True,
        code="ECONNREFUSED",
    )
    failure = failure_of(typed_failure(error, resolved, "off"))
    assert failure.message.startswith(
        "Could not connect to the model provider at the anthropic default endpoint "
        "(anthropic/claude-test): Connection error."
    )


def test_a_stream_that_ended_early_is_said_so_not_timed_out(resolved: ResolvedModel) -> None:
    """Review P L4: a run given up on cut streams ended "Last error: LLM request timed out"."""
    cut = provider_error(
        "stream closed before the response completed (no message_stop event)",
        transport=True,
        code="stream_incomplete",
    )
    failure = failure_of(typed_failure(cut, resolved, "off"))
    assert failure.message == (
        "LLM request failed: stream closed before the response completed (no message_stop event)"
    )
    assert "timed out" not in failure.message


def test_unclassified_transport_error_is_still_timeout(resolved: ResolvedModel) -> None:
    failure = failure_of(typed_failure(provider_error("???", transport=True), resolved, "off"))
    assert failure.reason == "timeout"
    other = failure_of(typed_failure(provider_error("???"), resolved, "off"))
    assert other.reason == "unknown"


def test_a_thinking_level_refused_as_a_validation_error_is_lowered_not_a_bad_request(
    resolved: ResolvedModel,
) -> None:
    """Review O F4: Anthropic's schema validation for a model without adaptive thinking was a
    `format` failure (the run moved to another provider, or ended). It is the level's refusal,
    and the next level tried is the highest the model lists below it."""
    entry = resolved.entry.model_copy(
        update={
            "capabilities": resolved.entry.capabilities.model_copy(
                update={"thinking_levels": ["off", "low", "medium", "high", "adaptive"]}
            )
        }
    )
    model = dataclasses.replace(resolved, entry=entry)
    message = "thinking.type: Input should be 'enabled' or 'disabled'"
    failure = failure_of(typed_failure(provider_error(message, status=400), model, "adaptive"))
    assert failure.reason == "thinking_unsupported"
    assert pick_fallback_thinking_level(failure.raw_message, ["adaptive"]) == "high"
    lowered = failure_of(typed_failure(provider_error(message, status=400), model, "low"))
    assert pick_fallback_thinking_level(lowered.raw_message, ["low"]) == "off"
    # The same words with thinking off are another request's fault.
    other = failure_of(typed_failure(provider_error(message, status=400), model, "off"))
    assert other.reason == "format"


@pytest.mark.parametrize(
    "message",
    [
        '400 think value "low" is not supported for this model',
        "thinking budget not supported",
        "Reasoning is not supported with this model",
    ],
)
def test_thinking_not_supported(resolved: ResolvedModel, message: str) -> None:
    err = typed_failure(provider_error(message, status=400), resolved, "low")
    assert err.non_retryable
    failure = failure_of(err)
    assert failure.reason == "thinking_unsupported"
    assert failure.raw_message == message
    assert failure.thinking == "low"


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 250000 tokens > 200000 maximum",
        "This model's maximum context length is 128000 tokens. However, your messages resulted "
        "in 130000 tokens.",
    ],
)
def test_context_overflow(resolved: ResolvedModel, message: str) -> None:
    err = typed_failure(provider_error(message, status=400), resolved, "off")
    assert err.non_retryable
    failure = failure_of(err)
    assert failure.reason == "context_overflow"
    assert failure.message.startswith("Context overflow")


def test_auth_failure(resolved: ResolvedModel) -> None:
    failure = failure_of(
        typed_failure(provider_error("invalid x-api-key", status=401), resolved, "off")
    )
    assert failure.reason == "auth"


def test_no_credentials_means_no_profile(resolved: ResolvedModel) -> None:
    offline = ResolvedModel(resolved.provider, resolved.model_id, None, resolved.entry)
    failure = failure_of(typed_failure(provider_error("boom", status=500), offline, "off"))
    assert failure.profile_id is None


def test_raw_message_is_capped(resolved: ResolvedModel) -> None:
    failure = failure_of(typed_failure(provider_error("x" * 5000), resolved, "off"))
    assert len(failure.raw_message) == 2000


def test_the_key_never_reaches_the_failure(resolved: ResolvedModel) -> None:
    secret = ResolvedModel(
        resolved.provider,
        resolved.model_id,
        Credentials(profile_id="p1", api_key="sk-secret-value-123"),
        resolved.entry,
    )
    err = typed_failure(provider_error("bad request", status=400), secret, "off")
    assert "sk-secret-value-123" not in repr(err.details) + err.message


def test_openai_reasoning_effort_refusal_is_thinking_unsupported(resolved: ResolvedModel) -> None:
    err = typed_failure(
        provider_error(
            "400 Unsupported value: 'reasoning_effort' does not support 'minimal' with this "
            "model. Supported values are: 'low', 'medium', and 'high'.",
            status=400,
            code="unsupported_value",
        ),
        resolved,
        "minimal",
    )
    assert failure_of(err).reason == "thinking_unsupported"


async def test_the_idle_limit_does_not_count_the_consumers_time() -> None:
    """Time the caller spends between two events (publishing them) is not the model's
    silence: only the waits for an event are limited."""
    got = []
    async for event in with_idle_limit(events([0.0, 0.0, 0.0]), 0.2):
        got.append(event)
        await asyncio.sleep(0.3)
    assert len(got) == 4


async def test_a_cancel_from_outside_stays_a_cancel() -> None:
    async def consume() -> None:
        async for _ in with_idle_limit(events([0.0, 30.0]), 5.0):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert task.cancelled()


async def test_one_timer_serves_the_whole_stream() -> None:
    loop = asyncio.get_running_loop()
    scheduled = 0
    call_at = loop.call_at

    def counted(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        nonlocal scheduled
        if getattr(callback, "__name__", "") == "_check":
            scheduled += 1
        return call_at(when, callback, *args, **kwargs)

    loop.call_at = counted  # type: ignore[method-assign]
    try:
        got = [e async for e in with_idle_limit(events([0.0] * 200), 60.0)]
    finally:
        del loop.call_at
    assert len(got) == 201 and scheduled == 1


def test_a_password_in_the_base_url_never_reaches_the_failure(resolved: ResolvedModel) -> None:
    base = dataclasses.replace(
        resolved,
        entry=resolved.entry.model_copy(
            update={"base_url": "http://bob:hunter2secret@10.1.2.3:9/v1"}
        ),
    )
    error = provider_error(
        "Connection refused to http://bob:hunter2secret@10.1.2.3:9/v1/messages",
        transport=True,
        code="ECONNREFUSED",
    )
    err = typed_failure(error, base, "off", received_chars=0)
    failure = failure_of(err)
    for said in (err.message, failure.message, failure.raw_message):
        assert "hunter2secret" not in said, said
    assert "bob:<redacted>@10.1.2.3" in failure.message
