"""The retry of a transient server error (issue 24): which failures, how long, what is said."""

from __future__ import annotations

import pytest

from agentlane.errors import FailoverReason as R
from agentlane.errors import TransportKind
from workflows.policy.failure_text import fallback_notice
from workflows.policy.transient_retry import (
    CHAIN_RETRY_STATUSES,
    OVERLOAD,
    SERVER,
    TRANSPORT,
    TransientRetry,
    backoff_seconds,
    gave_up_text,
    plan_transient_retry,
    retrying_text,
    seconds_text,
    too_long_text,
    transient_kind,
    transport_what,
    unresolved_text,
    wait_bound_text,
)


@pytest.mark.parametrize("status", [408, 499, 500, 502, 503, 504, 521, 522, 523, 524, 529])
def test_every_transient_status_classified_timeout_is_made_again(status: int) -> None:
    assert transient_kind(status, "timeout") == SERVER
    assert transient_kind(status, "unknown") == SERVER


def test_overloads_rate_limits_and_the_idle_watchdog_keep_their_own_paths() -> None:
    assert transient_kind(529, "overloaded") == OVERLOAD
    assert transient_kind(503, "overloaded") == OVERLOAD
    assert transient_kind(429, "rate_limit") is None
    assert transient_kind(500, "timeout", idle_timed_out=True) is None
    assert transient_kind(None, "timeout") is None, "no status and no transport kind"
    # Unless the caller found it a server error said in a stream (an `api_error` event).
    assert transient_kind(None, "timeout", server_error_in_stream=True) == SERVER
    assert transient_kind(None, "rate_limit", server_error_in_stream=True) is None
    assert transient_kind(400, "format") is None
    assert transient_kind(500, "context_overflow") is None


def test_the_backoff_doubles_from_two_seconds_with_twenty_percent_jitter() -> None:
    assert backoff_seconds(0, 0.5) == pytest.approx(2.0)
    assert backoff_seconds(1, 0.5) == pytest.approx(4.0)
    assert backoff_seconds(2, 0.0) == pytest.approx(6.4)
    assert backoff_seconds(2, 0.999999) == pytest.approx(9.6, abs=1e-4)
    assert backoff_seconds(10, 0.5) == pytest.approx(60.0), "at most a minute"


def test_a_retry_after_wins_over_the_backoff_and_zero_is_still_a_timer() -> None:
    plan = plan_transient_retry(
        retries_so_far=0, retry_after=7, waited_seconds=0, budget_seconds=600, draw=0.5
    )
    assert plan is not None and (plan.delay, plan.attempt, plan.retry_after) == (7, 2, True)
    zero = plan_transient_retry(
        retries_so_far=2, retry_after=0, waited_seconds=0, budget_seconds=600, draw=0.5
    )
    assert zero is not None and zero.delay == 0.1 and zero.attempt == 4


def test_a_wait_that_does_not_fit_the_budget_is_not_started() -> None:
    assert (
        plan_transient_retry(
            retries_so_far=0, retry_after=None, waited_seconds=0, budget_seconds=1, draw=0.5
        )
        is None
    )
    assert (
        plan_transient_retry(
            retries_so_far=0, retry_after=0.5, waited_seconds=0.6, budget_seconds=1, draw=0.5
        )
        is None
    )
    fits = plan_transient_retry(
        retries_so_far=0, retry_after=0.4, waited_seconds=0.6, budget_seconds=1, draw=0.5
    )
    assert fits is not None


def test_texts() -> None:
    plan = plan_transient_retry(
        retries_so_far=0, retry_after=None, waited_seconds=0, budget_seconds=600, draw=0.5
    )
    assert plan is not None
    assert retrying_text(500, "anthropic", plan) == (
        "HTTP 500 from anthropic; retrying in 2 s (attempt 2)"
    )
    assert seconds_text(1.84) == "1.8 s" and seconds_text(14.4) == "14 s"
    assert wait_bound_text(600) == "the 10-minute bound"
    assert wait_bound_text(3) == "the 3-second bound"
    assert too_long_text(700, 600, 0) == (
        "The provider asked to wait 700 s (Retry-After), more than the 10-minute bound on "
        "waiting (the session's `max_wait_seconds`, set for new sessions in `[agents.main]`)."
    )
    assert gave_up_text(
        status=502,
        provider="openai",
        model="openai/gpt",
        attempts=4,
        waited_seconds=14.2,
        budget_seconds=20,
        last_error="LLM request failed (HTTP 502).",
    ) == (
        "openai/gpt kept failing: HTTP 502 from openai on 4 attempts, after waiting 14 s in all; "
        "the next wait would pass the 20-second bound on waiting (the session's "
        "`max_wait_seconds`"
        ", set for new sessions in `[agents.main]`). Last error: LLM request failed (HTTP 502)."
    )
    assert 408 not in CHAIN_RETRY_STATUSES and 529 in CHAIN_RETRY_STATUSES


def test_the_fallback_notice_names_the_status_and_reason() -> None:
    assert fallback_notice(
        "nov1/gpt-m",
        "mock-ant/claude-m",
        status=404,
        reason=R.MODEL_NOT_FOUND,
        error="LLM request rejected: Not Found",
    ) == (
        "nov1/gpt-m is unavailable (HTTP 404, model_not_found; LLM request rejected: Not Found); "
        "falling back to mock-ant/claude-m"
    )
    assert fallback_notice("a/b", "c/d", status=None, reason=None, error="") == (
        "a/b is unavailable (no reason given); falling back to c/d"
    )


def test_the_readme_quote_of_a_run_ended_past_the_budget() -> None:
    assert gave_up_text(
        status=500,
        provider="anthropic",
        model="anthropic/claude-sonnet-4-5",
        attempts=4,
        waited_seconds=14.2,
        budget_seconds=600,
        last_error="…",
    ) == (
        "anthropic/claude-sonnet-4-5 kept failing: HTTP 500 from anthropic on 4 attempts, after "
        "waiting 14 s in all; the next wait would pass the 10-minute bound on waiting (the "
        "session's `max_wait_seconds`, set for new sessions in `[agents.main]`). Last error: …"
    )


def test_a_transport_fault_is_made_again_at_the_sdks_pace_within_the_budget() -> None:
    assert transient_kind(None, "timeout", transport=TransportKind.CONNECTION) == TRANSPORT
    assert transient_kind(None, "timeout", transport=TransportKind.STREAM_CUT) == TRANSPORT
    assert transient_kind(None, "timeout", transport=TransportKind.CONNECTION_REFUSED) == TRANSPORT
    assert (
        transient_kind(None, "timeout", idle_timed_out=True, transport=TransportKind.CONNECTION)
        is None
    ), "the idle watchdog keeps its own retry"

    def plan(
        retries: int,
        waited: float = 0.0,
        draw: float = 0.5,
        code: str | None = None,
        few_for_malformed: bool = True,
    ) -> TransientRetry | None:
        return plan_transient_retry(
            retries_so_far=retries,
            retry_after=None,
            waited_seconds=waited,
            budget_seconds=600,
            draw=draw,
            kind=TRANSPORT,
            code=code,
            few_for_malformed=few_for_malformed,
        )

    def delay(retries: int, draw: float = 0.5) -> float:
        planned = plan(retries, draw=draw)
        assert planned is not None
        return planned.delay

    assert [delay(n) for n in range(7)] == pytest.approx([0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0])
    assert delay(0, draw=0.0) == pytest.approx(0.4)
    assert delay(0, draw=0.99999) == pytest.approx(0.6, abs=1e-4)
    assert plan(3, waited=597) is None, "the shared budget bounds it like a server error"
    assert plan(0, code="ENOTFOUND") is not None
    assert plan(1, code="ENOTFOUND") is None, "a host that does not resolve: once more only"
    # Unreadable events: twice more, then the run says why it stopped.
    assert plan(1, code="malformed_response") is not None
    assert plan(2, code="malformed_response") is None
    assert "does not speak this provider's streaming API" in (
        unresolved_text("malformed_response") or ""
    )
    old_run = plan(5, code="malformed_response", few_for_malformed=False)
    assert old_run is not None, "runs recorded before the limit replay as they ran"


def test_what_failed_in_words() -> None:
    refused = TransportKind.CONNECTION_REFUSED
    assert transport_what(refused, "127.0.0.1:9", "openai", "ECONNREFUSED", 0) == (
        "connection refused by 127.0.0.1:9 (openai)"
    )
    lost = transport_what(TransportKind.CONNECTION, "api.openai.com", "openai", "ECONNRESET", 0)
    assert lost == "connection to api.openai.com lost (openai, ECONNRESET)"
    unresolved = transport_what(TransportKind.CONNECTION, "nohost:80", "openai", "ENOTFOUND", None)
    assert unresolved == "host nohost:80 not found (openai, ENOTFOUND)"
    slow = transport_what(TransportKind.CONNECTION, "h:1", "openai", "ETIMEDOUT", None)
    assert slow == "connection to h:1 timed out (openai, ETIMEDOUT)"
    cut = TransportKind.STREAM_CUT
    assert transport_what(cut, "h:1", "anthropic", "stream_incomplete", 12) == (
        "stream from h:1 cut short after 12 characters (anthropic, stream_incomplete)"
    )
    assert transport_what(cut, "h:1", "anthropic", None, 1) == (
        "stream from h:1 cut short after 1 character (anthropic)"
    )
    assert transport_what(cut, "h:1", "anthropic", "ECONNRESET", 0) == (
        "stream from h:1 cut short before any output (anthropic, ECONNRESET)"
    )


def test_the_readme_quotes_of_a_transport_fault() -> None:
    plan = plan_transient_retry(
        retries_so_far=0,
        retry_after=None,
        waited_seconds=0,
        budget_seconds=600,
        draw=0.5,
        kind=TRANSPORT,
    )
    assert plan is not None
    what = transport_what(
        TransportKind.CONNECTION_REFUSED, "127.0.0.1:8080", "openai", "ECONNREFUSED", 0
    )
    assert retrying_text(0, "openai", plan, what) == (
        "Connection refused by 127.0.0.1:8080 (openai); retrying in 0.5 s (attempt 2)"
    )
    cut = transport_what(
        TransportKind.STREAM_CUT, "api.anthropic.com", "anthropic", "ECONNRESET", 12
    )
    assert retrying_text(0, "anthropic", plan, cut).startswith(
        "Stream from api.anthropic.com cut short after 12 characters (anthropic, ECONNRESET); "
    )
    assert gave_up_text(
        status=0,
        provider="openai",
        model="openai/gpt-4.1",
        attempts=61,
        waited_seconds=596.4,
        budget_seconds=600,
        last_error="…",
        what=what,
    ) == (
        "openai/gpt-4.1 kept failing: connection refused by 127.0.0.1:8080 (openai) on 61 "
        "attempts, after waiting 596 s in all; the next wait would pass the 10-minute bound on "
        "waiting (the session's `max_wait_seconds`"
        ", set for new sessions in `[agents.main]`). Last error: …"
    )
    assert gave_up_text(
        status=0,
        provider="openai",
        model="openai/gpt-4.1",
        attempts=2,
        waited_seconds=0.5,
        budget_seconds=600,
        last_error="…",
        what="host nohost not found (openai, ENOTFOUND)",
        why=unresolved_text("ENOTFOUND"),
    ) == (
        "openai/gpt-4.1 kept failing: host nohost not found (openai, ENOTFOUND) on 2 attempts, "
        "after waiting 0.5 s in all; a host name that does not resolve is tried once more only: "
        "check the base URL. Last error: …"
    )
    assert unresolved_text("ECONNRESET") is None
