"""How a failed model call enters the run-loop decisions (SPEC §4.3, §4.4, §4.6.5, §7.7)."""

from __future__ import annotations

import pytest

from agentlane.errors import FailoverReason as R
from agentlane.errors import ModelFailure
from workflows.policy.failover import (
    DecisionKind,
    FailoverCounters,
    FailoverSettings,
    Stage,
    decide_assistant_failure,
)
from workflows.policy.failure_facts import failure_facts, failure_stage, profile_mark


def failure(reason: str, **kw: object) -> ModelFailure:
    return ModelFailure.model_validate(
        {"reason": reason, "message": "m", "provider": "anthropic", "model": "x", **kw}
    )


def test_a_refused_request_is_prompt_stage() -> None:
    assert failure_stage(failure("rate_limit", status=429)) is Stage.PROMPT


@pytest.mark.parametrize("kw", [{"idle_timed_out": True}, {"produced_output": True}])
def test_silence_or_shown_text_is_assistant_stage(kw: dict[str, object]) -> None:
    assert failure_stage(failure("timeout", **kw)) is Stage.ASSISTANT


@pytest.mark.parametrize(
    ("reason", "kw", "mark"),
    [
        ("rate_limit", {}, R.RATE_LIMIT),
        ("billing", {}, R.BILLING),
        ("timeout", {}, None),
        ("timeout", {"idle_timed_out": True}, None),
        ("thinking_unsupported", {}, None),
        ("context_overflow", {}, None),
    ],
)
def test_a_timeout_never_marks_a_profile(
    reason: str, kw: dict[str, object], mark: R | None
) -> None:
    assert profile_mark(failure(reason, **kw)) is mark


def test_non_failover_kinds_carry_no_reason() -> None:
    facts = failure_facts(failure("thinking_unsupported", raw_message="supported values: low"))
    assert facts.reason is None and facts.kind == "thinking_unsupported"
    assert not facts.failover_failure


def test_an_idle_timeout_is_a_timed_out_assistant_failure() -> None:
    facts = failure_facts(failure("timeout", idle_timed_out=True))
    assert facts.idle_timed_out and not facts.timed_out and facts.reason is R.TIMEOUT


def test_t33_idle_timeout_with_nothing_shown_and_no_fallback_is_retried_once() -> None:
    facts = failure_facts(failure("timeout", idle_timed_out=True))
    settings = FailoverSettings()
    first = decide_assistant_failure(facts, FailoverCounters(), settings, more_profiles=False)
    assert first.kind is DecisionKind.RETRY_SAME and first.mark_profile is None
    second = decide_assistant_failure(facts, first.counters, settings, more_profiles=False)
    assert second.kind is DecisionKind.FAIL and "idleTimeoutSeconds" in second.message


def test_t34_idle_timeout_rotates_without_marking() -> None:
    facts = failure_facts(failure("timeout", idle_timed_out=True))
    decision = decide_assistant_failure(
        facts, FailoverCounters(), FailoverSettings(), more_profiles=True
    )
    assert decision.kind is DecisionKind.ROTATE_PROFILE and decision.mark_profile is None


def test_idle_timeout_after_shown_text_is_not_retried_on_the_same_model() -> None:
    facts = failure_facts(failure("timeout", idle_timed_out=True, produced_output=True))
    decision = decide_assistant_failure(
        facts, FailoverCounters(), FailoverSettings(), more_profiles=False
    )
    assert decision.kind is not DecisionKind.RETRY_SAME


def test_idle_timeout_with_a_fallback_goes_to_the_next_model() -> None:
    facts = failure_facts(failure("timeout", idle_timed_out=True))
    settings = FailoverSettings(fallback_configured=True)
    decision = decide_assistant_failure(facts, FailoverCounters(), settings, more_profiles=False)
    assert decision.kind is DecisionKind.FALLBACK_MODEL and decision.reason is R.TIMEOUT
