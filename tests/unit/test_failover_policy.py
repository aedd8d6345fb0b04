"""Run-loop failover decisions (SPEC §4.4, §4.5, §4.6.5, §4.7; §18.2, §18.3, §18.5; §20)."""

from __future__ import annotations

import pytest

from agentlane.errors import FailoverReason as R
from workflows.policy.failover import (
    IDLE_TIMEOUT_TEXT,
    OVERLOADED_ESCALATION_TEXT,
    RATE_LIMIT_ESCALATION_TEXT,
    RETRY_LIMIT_TEXT,
    RUN_TIMEOUT_TEXT,
    DecisionKind,
    FailoverCounters,
    FailoverSettings,
    FailureFacts,
    OverflowFacts,
    Stage,
    TableAction,
    TableDecision,
    decide_assistant_failure,
    decide_context_overflow,
    decide_overflow_after_failed_compaction,
    decide_prompt_failure,
    decide_retry_limit,
    merge_retry_failover_reason,
    resolve_failover_action,
    run_loop_iteration_limit,
)

FALLBACK = FailoverSettings(fallback_configured=True)
NO_FALLBACK = FailoverSettings()
FRESH = FailoverCounters()

# --- §18.3 the table ------------------------------------------------------------------------


def test_t17_retry_limit_row() -> None:
    got = resolve_failover_action(
        Stage.RETRY_LIMIT, fallback_configured=True, failover_reason=R.RATE_LIMIT
    )
    assert got == TableDecision(TableAction.FALLBACK_MODEL, R.RATE_LIMIT)
    got = resolve_failover_action(
        Stage.RETRY_LIMIT, fallback_configured=True, failover_reason=R.TIMEOUT
    )
    assert got == TableDecision(TableAction.RETURN_ERROR_PAYLOAD)


@pytest.mark.parametrize("reason", [R.MODEL_NOT_FOUND, R.FORMAT, R.SESSION_EXPIRED, None])
def test_retry_limit_not_escalated(reason: R | None) -> None:
    got = resolve_failover_action(
        Stage.RETRY_LIMIT, fallback_configured=True, failover_reason=reason
    )
    assert got.action is TableAction.RETURN_ERROR_PAYLOAD


def test_t18_prompt_rotates_then_falls_back() -> None:
    common = {
        "fallback_configured": True,
        "failover_failure": True,
        "failover_reason": R.RATE_LIMIT,
    }
    first = resolve_failover_action(Stage.PROMPT, **common)  # type: ignore[arg-type]
    assert first == TableDecision(TableAction.ROTATE_PROFILE, R.RATE_LIMIT)
    again = resolve_failover_action(Stage.PROMPT, profile_rotated=True, **common)  # type: ignore[arg-type]
    assert again == TableDecision(TableAction.FALLBACK_MODEL, R.RATE_LIMIT)


def test_prompt_timeout_never_rotates() -> None:
    got = resolve_failover_action(
        Stage.PROMPT, fallback_configured=True, failover_failure=True, failover_reason=R.TIMEOUT
    )
    assert got == TableDecision(TableAction.FALLBACK_MODEL, R.TIMEOUT)
    got = resolve_failover_action(
        Stage.PROMPT, fallback_configured=False, failover_failure=True, failover_reason=R.TIMEOUT
    )
    assert got.action is TableAction.SURFACE_ERROR


def test_t19_assistant_rows() -> None:
    rotate = resolve_failover_action(
        Stage.ASSISTANT, fallback_configured=False, failover_reason=R.RATE_LIMIT
    )
    assert rotate == TableDecision(TableAction.ROTATE_PROFILE, R.RATE_LIMIT)
    fallback = resolve_failover_action(
        Stage.ASSISTANT,
        fallback_configured=True,
        failover_reason=R.RATE_LIMIT,
        profile_rotated=True,
    )
    assert fallback == TableDecision(TableAction.FALLBACK_MODEL, R.RATE_LIMIT)
    normal = resolve_failover_action(
        Stage.ASSISTANT, fallback_configured=True, failover_reason=None
    )
    assert normal == TableDecision(TableAction.CONTINUE_NORMAL)


def test_t20_external_abort_surfaces() -> None:
    prompt = resolve_failover_action(
        Stage.PROMPT,
        fallback_configured=True,
        failover_failure=True,
        failover_reason=R.TIMEOUT,
        external_abort=True,
    )
    assert prompt == TableDecision(TableAction.SURFACE_ERROR, R.TIMEOUT)
    assistant = resolve_failover_action(
        Stage.ASSISTANT,
        fallback_configured=True,
        failover_reason=None,
        timed_out=True,
        external_abort=True,
    )
    assert assistant == TableDecision(TableAction.SURFACE_ERROR, None)


def test_t20_merge_retry_reason() -> None:
    assert merge_retry_failover_reason(R.RATE_LIMIT, None) is R.RATE_LIMIT
    assert merge_retry_failover_reason(None, None, timed_out=True) is R.TIMEOUT
    assert merge_retry_failover_reason(R.RATE_LIMIT, R.AUTH, timed_out=True) is R.AUTH


def test_assistant_timeout_fallback_reason_is_timeout() -> None:
    got = resolve_failover_action(
        Stage.ASSISTANT,
        fallback_configured=True,
        failover_reason=R.RATE_LIMIT,
        timed_out=True,
        profile_rotated=True,
    )
    assert got == TableDecision(TableAction.FALLBACK_MODEL, R.TIMEOUT)


def test_timeout_during_compaction_does_not_rotate() -> None:
    got = resolve_failover_action(
        Stage.ASSISTANT,
        fallback_configured=True,
        failover_reason=None,
        aborted=True,
        timed_out=True,
        timed_out_during_compaction=True,
    )
    assert got.action is TableAction.CONTINUE_NORMAL


# --- §4.1 / §20.5 iteration bound and §4.7 exhaustion ---------------------------------------


@pytest.mark.parametrize(
    ("candidates", "limit"),
    [(0, 32), (1, 32), (2, 40), (3, 48), (10, 104), (16, 152), (17, 160), (50, 160)],
)
def test_iteration_bound(candidates: int, limit: int) -> None:
    assert run_loop_iteration_limit(candidates) == limit


def test_retry_limit_not_reached() -> None:
    assert decide_retry_limit(FailoverCounters(iterations=31), FALLBACK, limit=32) is None


def test_retry_limit_escalates_replay_safe_reason() -> None:
    counters = FailoverCounters(iterations=32, last_retry_reason=R.RATE_LIMIT)
    got = decide_retry_limit(counters, FALLBACK, limit=32)
    assert got is not None and got.kind is DecisionKind.FALLBACK_MODEL
    assert got.message == "Exceeded retry limit after 32 attempts (max=32)."
    assert (got.reason, got.status) == (R.RATE_LIMIT, 429)


@pytest.mark.parametrize(
    ("settings", "reason"), [(NO_FALLBACK, R.RATE_LIMIT), (FALLBACK, R.TIMEOUT), (FALLBACK, None)]
)
def test_retry_limit_payload(settings: FailoverSettings, reason: R | None) -> None:
    got = decide_retry_limit(
        FailoverCounters(iterations=40, last_retry_reason=reason), settings, limit=40
    )
    assert got is not None and got.kind is DecisionKind.FAIL
    assert (got.message, got.error_kind) == (RETRY_LIMIT_TEXT, "retry_limit")


# --- §4.4.1 prompt stage --------------------------------------------------------------------


def _prompt(reason: R | None, **kw: object) -> FailureFacts:
    return FailureFacts(reason=reason, failover_failure=reason is not None, **kw)  # type: ignore[arg-type]


def test_prompt_rotates_and_marks() -> None:
    got = decide_prompt_failure(_prompt(R.AUTH), FRESH, FALLBACK, more_profiles=True)
    assert got.kind is DecisionKind.ROTATE_PROFILE
    assert got.mark_profile is R.AUTH
    assert got.counters.last_retry_reason is R.AUTH


def test_prompt_rate_limit_cap_escalates_only_with_fallbacks() -> None:
    once = decide_prompt_failure(_prompt(R.RATE_LIMIT), FRESH, FALLBACK, more_profiles=True)
    assert once.kind is DecisionKind.ROTATE_PROFILE
    assert once.counters.rate_limit_rotations == 1
    twice = decide_prompt_failure(
        _prompt(R.RATE_LIMIT), once.counters, FALLBACK, more_profiles=True
    )
    assert twice.kind is DecisionKind.FALLBACK_MODEL
    assert (twice.message, twice.status) == (RATE_LIMIT_ESCALATION_TEXT, 429)
    assert twice.mark_profile is R.RATE_LIMIT
    # Without fallbacks the cap does not apply: keep rotating.
    alone = decide_prompt_failure(
        _prompt(R.RATE_LIMIT), once.counters, NO_FALLBACK, more_profiles=True
    )
    assert alone.kind is DecisionKind.ROTATE_PROFILE


def test_prompt_rate_limit_cap_is_configurable() -> None:
    settings = FailoverSettings(fallback_configured=True, rate_limit_rotation_cap=2)
    counters = FailoverCounters(rate_limit_rotations=1)
    got = decide_prompt_failure(_prompt(R.RATE_LIMIT), counters, settings, more_profiles=True)
    assert got.kind is DecisionKind.ROTATE_PROFILE


def test_prompt_no_profile_left_falls_back() -> None:
    got = decide_prompt_failure(
        _prompt(R.AUTH, message="LLM request unauthorized."), FRESH, FALLBACK, more_profiles=False
    )
    assert got.kind is DecisionKind.FALLBACK_MODEL
    assert (got.reason, got.status, got.mark_profile) == (R.AUTH, 401, R.AUTH)


def test_prompt_no_profile_no_fallback_fails_with_message() -> None:
    got = decide_prompt_failure(
        _prompt(R.AUTH, message="LLM request unauthorized."),
        FRESH,
        NO_FALLBACK,
        more_profiles=False,
    )
    assert got.kind is DecisionKind.FAIL
    assert got.message == "LLM request unauthorized."


def test_prompt_timeout_is_never_marked_nor_rotated() -> None:
    got = decide_prompt_failure(_prompt(R.TIMEOUT), FRESH, FALLBACK, more_profiles=True)
    assert got.kind is DecisionKind.FALLBACK_MODEL
    assert got.mark_profile is None
    assert got.reason is R.TIMEOUT


def test_prompt_overload_backoff_only_when_configured() -> None:
    plain = decide_prompt_failure(_prompt(R.OVERLOADED), FRESH, FALLBACK, more_profiles=True)
    assert plain.kind is DecisionKind.ROTATE_PROFILE and plain.backoff_ms == 0
    settings = FailoverSettings(fallback_configured=True, overload_backoff_ms=321)
    slow = decide_prompt_failure(_prompt(R.OVERLOADED), FRESH, settings, more_profiles=True)
    assert slow.backoff_ms == 321
    other = decide_prompt_failure(_prompt(R.AUTH), FRESH, settings, more_profiles=True)
    assert other.backoff_ms == 0


def test_prompt_role_ordering_and_image_size() -> None:
    role = decide_prompt_failure(
        FailureFacts(reason=R.FORMAT, kind="role_ordering"), FRESH, FALLBACK, more_profiles=True
    )
    assert role.kind is DecisionKind.FAIL and role.error_kind == "role_ordering"
    assert role.message.startswith("Message ordering conflict - please try again.")
    image = decide_prompt_failure(
        FailureFacts(reason=None, kind="image_size", image_max_mb=5),
        FRESH,
        FALLBACK,
        more_profiles=True,
    )
    assert image.message == (
        "Image too large for the model (max 5 MB). Please compress or resize the image and "
        "try again."
    )


THINK_LOW = '400 think value "low" is not supported for this model'


def test_prompt_thinking_error_rotates_first_then_lowers() -> None:
    """§6 derived case: a prompt-stage 400 think error is `format` → rotation first."""
    facts = _prompt(R.FORMAT, raw_message=THINK_LOW)
    counters = FailoverCounters(attempted_thinking=frozenset({"low"}))
    first = decide_prompt_failure(facts, counters, FALLBACK, more_profiles=True)
    assert first.kind is DecisionKind.ROTATE_PROFILE and first.mark_profile is R.FORMAT
    last = decide_prompt_failure(facts, counters, FALLBACK, more_profiles=False)
    assert (last.kind, last.thinking) == (DecisionKind.LOWER_THINKING, "off")


# --- §18.2 thinking fallback in the loop (T15) ----------------------------------------------


def test_t15_assistant_thinking_fallback_comes_first() -> None:
    facts = FailureFacts(reason=R.FORMAT, failover_failure=True, raw_message=THINK_LOW)
    got = decide_assistant_failure(facts, FRESH, FALLBACK, more_profiles=True)
    assert (got.kind, got.thinking) == (DecisionKind.LOWER_THINKING, "off")
    tried = FailoverCounters(attempted_thinking=frozenset({"off"}))
    nothing_left = decide_assistant_failure(facts, tried, FALLBACK, more_profiles=True)
    assert nothing_left.kind is DecisionKind.ROTATE_PROFILE


def test_t15_supported_values_in_order() -> None:
    facts = FailureFacts(reason=None, raw_message='Supported values are: "high", "medium"')
    got = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=False)
    assert got.thinking == "high"
    got = decide_assistant_failure(
        facts, FRESH.with_thinking({"high"}), NO_FALLBACK, more_profiles=False
    )
    assert got.thinking == "medium"


# --- §4.4.2 assistant stage and §18.5 timeouts ----------------------------------------------


def test_t34_timeout_rotates_without_cooldown() -> None:
    facts = FailureFacts(reason=R.TIMEOUT, failover_failure=True, timed_out=True, aborted=True)
    got = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=True)
    assert got.kind is DecisionKind.ROTATE_PROFILE
    assert got.mark_profile is None
    assert got.counters.last_retry_reason is R.TIMEOUT


def test_t34_timeout_during_compaction_no_rotation() -> None:
    facts = FailureFacts(
        reason=None, timed_out=True, aborted=True, timed_out_during_compaction=True
    )
    got = decide_assistant_failure(facts, FRESH, FALLBACK, more_profiles=True)
    assert got.kind is DecisionKind.CONTINUE_NORMAL


def test_timeout_no_profile_falls_back_with_timeout() -> None:
    facts = FailureFacts(reason=None, timed_out=True, aborted=True)
    got = decide_assistant_failure(facts, FRESH, FALLBACK, more_profiles=False)
    assert got.kind is DecisionKind.FALLBACK_MODEL
    assert (got.reason, got.status, got.message) == (R.TIMEOUT, 408, "LLM request timed out.")
    assert got.mark_profile is None


def test_t31_timeout_without_fallback_surfaces_text() -> None:
    facts = FailureFacts(reason=None, timed_out=True, aborted=True)
    got = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=False)
    assert got.kind is DecisionKind.FAIL
    assert got.message == RUN_TIMEOUT_TEXT
    assert "timed out" in got.message


def test_t33_idle_timeout_retries_same_model_once() -> None:
    facts = FailureFacts(reason=None, timed_out=True, idle_timed_out=True, aborted=True)
    first = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=False)
    assert first.kind is DecisionKind.RETRY_SAME
    assert first.counters.same_model_idle_retries == 1
    second = decide_assistant_failure(facts, first.counters, NO_FALLBACK, more_profiles=False)
    assert second.kind is DecisionKind.FAIL
    assert second.message == IDLE_TIMEOUT_TEXT
    assert "agents.defaults.llm.idleTimeoutSeconds" in second.message
    assert "agents.defaults.timeoutSeconds" not in second.message


@pytest.mark.parametrize(
    "facts_kw",
    [
        {"produced_output": True},
        {"timed_out_during_compaction": True},
    ],
)
def test_idle_retry_needs_silence_and_no_compaction(facts_kw: dict[str, bool]) -> None:
    facts = FailureFacts(reason=None, timed_out=True, idle_timed_out=True, aborted=True, **facts_kw)
    got = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=False)
    assert got.kind is not DecisionKind.RETRY_SAME


def test_idle_retry_not_with_fallbacks() -> None:
    facts = FailureFacts(reason=None, timed_out=True, idle_timed_out=True, aborted=True)
    got = decide_assistant_failure(facts, FRESH, FALLBACK, more_profiles=False)
    assert got.kind is DecisionKind.FALLBACK_MODEL


def test_idle_retry_not_on_external_abort() -> None:
    facts = FailureFacts(
        reason=None, timed_out=True, idle_timed_out=True, aborted=True, external_abort=True
    )
    got = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=True)
    assert got.kind is not DecisionKind.RETRY_SAME


def test_t48_overloaded_rotates_and_marks_then_cap_escalates() -> None:
    facts = FailureFacts(reason=R.OVERLOADED, failover_failure=True, message="overloaded_error")
    once = decide_assistant_failure(facts, FRESH, FALLBACK, more_profiles=True)
    assert once.kind is DecisionKind.ROTATE_PROFILE
    assert (once.mark_profile, once.backoff_ms) == (R.OVERLOADED, 0)
    twice = decide_assistant_failure(facts, once.counters, FALLBACK, more_profiles=True)
    assert twice.kind is DecisionKind.FALLBACK_MODEL
    assert (twice.message, twice.status) == (OVERLOADED_ESCALATION_TEXT, 503)
    assert twice.counters.overload_rotations == 2
    alone = decide_assistant_failure(facts, once.counters, NO_FALLBACK, more_profiles=True)
    assert alone.kind is DecisionKind.ROTATE_PROFILE


def test_t48_overload_backoff() -> None:
    facts = FailureFacts(reason=R.OVERLOADED, failover_failure=True)
    settings = FailoverSettings(overload_backoff_ms=321)
    got = decide_assistant_failure(facts, FRESH, settings, more_profiles=True)
    assert got.backoff_ms == 321


def test_assistant_rate_limit_cap() -> None:
    facts = FailureFacts(reason=R.RATE_LIMIT, failover_failure=True)
    counters = FailoverCounters(rate_limit_rotations=1)
    got = decide_assistant_failure(facts, counters, FALLBACK, more_profiles=True)
    assert (got.kind, got.message) == (DecisionKind.FALLBACK_MODEL, RATE_LIMIT_ESCALATION_TEXT)


def test_assistant_no_profile_no_fallback_continues_with_error_text() -> None:
    facts = FailureFacts(reason=R.BILLING, failover_failure=True, message="billing")
    got = decide_assistant_failure(facts, FRESH, NO_FALLBACK, more_profiles=False)
    assert got.kind is DecisionKind.CONTINUE_NORMAL
    assert got.mark_profile is R.BILLING


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        (R.RATE_LIMIT, "LLM request rate limited."),
        (R.AUTH, "LLM request unauthorized."),
        (R.FORMAT, "LLM request failed."),
    ],
)
def test_assistant_fallback_generic_texts(reason: R, text: str) -> None:
    facts = FailureFacts(reason=reason, failover_failure=True)
    got = decide_assistant_failure(facts, FRESH, FALLBACK, more_profiles=False)
    assert got.kind is DecisionKind.FALLBACK_MODEL
    assert got.message == text


def test_assistant_without_failure_continues() -> None:
    got = decide_assistant_failure(FailureFacts(reason=None), FRESH, FALLBACK, more_profiles=True)
    assert got.kind is DecisionKind.CONTINUE_NORMAL


# --- §4.5 overflow (§18.4 decision parts, §20.4) ---------------------------------------------


def test_overflow_compacts_three_times_then_fails() -> None:
    counters = FRESH
    kinds = []
    for _ in range(4):
        got = decide_context_overflow(OverflowFacts(), counters)
        kinds.append(got.kind)
        counters = got.counters
    assert kinds == [DecisionKind.COMPACT] * 3 + [DecisionKind.FAIL]
    assert got.error_kind == "context_overflow"
    assert got.message.startswith("Context overflow: prompt too large for the model.")


def test_overflow_reuses_in_attempt_compaction() -> None:
    got = decide_context_overflow(OverflowFacts(compacted_in_attempt=True), FRESH)
    assert got.kind is DecisionKind.RETRY_SAME
    assert got.counters.overflow_compactions == 1


def test_compaction_failure_text_skips_compaction() -> None:
    got = decide_context_overflow(OverflowFacts(compaction_failure=True), FRESH)
    assert (got.kind, got.error_kind) == (DecisionKind.FAIL, "compaction_failure")


def test_truncation_once_without_resetting_compactions() -> None:
    facts = OverflowFacts(oversized_tool_results=True)
    counters = FailoverCounters(overflow_compactions=1)
    got = decide_overflow_after_failed_compaction(facts, counters)
    assert got.kind is DecisionKind.TRUNCATE
    assert got.counters.overflow_compactions == 1
    again = decide_overflow_after_failed_compaction(facts, got.counters)
    assert again.kind is DecisionKind.FAIL


def test_overflow_never_falls_back() -> None:
    for facts in (OverflowFacts(), OverflowFacts(compaction_failure=True)):
        counters = FailoverCounters(overflow_compactions=3, tool_result_truncation_tried=True)
        assert decide_context_overflow(facts, counters).kind is DecisionKind.FAIL
