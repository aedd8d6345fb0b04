"""Model fallback and reply-layer texts (SPEC §8, §18.7 T49–T52, §20.7)."""

from __future__ import annotations

import pytest

from activities.providers.error_classification import classify_failover_reason
from agentlane.errors import FailoverReason as R
from workflows.policy.model_fallback import (
    RATE_LIMIT_GENERIC_REPLY,
    CandidateError,
    FailureOutcome,
    FallbackChain,
    ModelRef,
    ProbeThrottle,
    ProviderAvailability,
    fallback_summary,
    next_candidate,
    rate_limit_cooldown_reply,
    record_failure,
    reply_failure_text,
    resolve_fallback_candidates,
    start_chain,
)

NOW = 1_000_000.0
OPEN = ProviderAvailability(profile_count=1, available_count=1)


def cooling(reason: R | None, expiry: float | None = None) -> ProviderAvailability:
    return ProviderAvailability(
        profile_count=2,
        available_count=0,
        unavailable_reason=reason,
        soonest_cooldown_expiry=expiry,
    )


def lookup(table: dict[str, ProviderAvailability]):  # type: ignore[no-untyped-def]
    return lambda provider, model: table.get(provider, OPEN)


def keys(refs: list[ModelRef]) -> list[str]:
    return [ref.key for ref in refs]


# --- §8.1 -----------------------------------------------------------------------------------


def test_candidates_same_provider_use_fallbacks_then_primary() -> None:
    got = resolve_fallback_candidates("openai/gpt-4.1", "openai/gpt-4.1", ["anthropic/claude"])
    assert keys(got) == ["openai/gpt-4.1", "anthropic/claude"]


def test_candidates_other_provider_skip_fallbacks_unless_on_one() -> None:
    got = resolve_fallback_candidates("groq/x", "openai/a", ["anthropic/b"])
    assert keys(got) == ["groq/x", "openai/a"]
    on_fallback = resolve_fallback_candidates("anthropic/b", "openai/a", ["anthropic/b", "x/c"])
    assert keys(on_fallback) == ["anthropic/b", "x/c", "openai/a"]


def test_candidates_override() -> None:
    assert keys(resolve_fallback_candidates("openai/a", "openai/a", ["x/y"], [])) == ["openai/a"]
    got = resolve_fallback_candidates("openai/a", "openai/p", ["x/y"], ["z/w", "openai/a"])
    assert keys(got) == ["openai/a", "z/w"]


def test_model_ref_keeps_slashes_in_model() -> None:
    ref = ModelRef.parse(" OpenRouter/meta-llama/llama-3.3-70b:free ")
    assert ref == ModelRef("openrouter", "meta-llama/llama-3.3-70b:free")
    assert ModelRef.parse("nomodel") is None


# --- §18.7 T49, T50 -------------------------------------------------------------------------


def test_t49_timeout_on_requested_falls_to_configured_primary() -> None:
    candidates = resolve_fallback_candidates(
        "openrouter/meta-llama/llama-3.3-70b:free", "openai/gpt-4.1-mini", []
    )
    assert keys(candidates) == ["openrouter/meta-llama/llama-3.3-70b:free", "openai/gpt-4.1-mini"]
    chain = start_chain(candidates)
    step = next_candidate(chain, lookup({}), NOW)
    assert step.candidate == candidates[0]
    message = "Error: connect ETIMEDOUT 10.0.0.1:443"
    error = CandidateError(message, reason=classify_failover_reason(message))
    chain, outcome = record_failure(step.chain, candidates[0], error)
    assert outcome is FailureOutcome.NEXT
    step = next_candidate(chain, lookup({}), NOW)
    assert step.candidate == candidates[1]  # second and last call; it succeeds


# --- §8.3 -----------------------------------------------------------------------------------


def _two() -> tuple[FallbackChain, list[ModelRef]]:
    candidates = [ModelRef("openai", "a"), ModelRef("anthropic", "b")]
    return start_chain(candidates), candidates


def test_context_overflow_is_rethrown_not_fallen_back() -> None:
    chain, candidates = _two()
    step = next_candidate(chain, lookup({}), NOW)
    error = CandidateError("prompt is too long", context_overflow=True)
    assert record_failure(step.chain, candidates[0], error)[1] is FailureOutcome.RETHROW


def test_unclassified_error_advances_unless_last() -> None:
    chain, candidates = _two()
    step = next_candidate(chain, lookup({}), NOW)
    chain, outcome = record_failure(step.chain, candidates[0], CandidateError("weird"))
    assert outcome is FailureOutcome.NEXT
    assert chain.attempts[0].reason is R.UNKNOWN
    step = next_candidate(chain, lookup({}), NOW)
    assert record_failure(step.chain, candidates[1], CandidateError("weird"))[1] is (
        FailureOutcome.RETHROW
    )


def test_live_model_switch_counts_as_overloaded() -> None:
    chain, candidates = _two()
    step = next_candidate(chain, lookup({}), NOW)
    chain, _ = record_failure(
        step.chain, candidates[0], CandidateError("switch", live_model_switch=True)
    )
    assert chain.attempts[0].reason is R.OVERLOADED


def test_summary_lists_attempts_and_expiry() -> None:
    chain, candidates = _two()
    step = next_candidate(chain, lookup({}), NOW)
    chain, _ = record_failure(step.chain, candidates[0], CandidateError("429", R.RATE_LIMIT))
    step = next_candidate(chain, lookup({}), NOW)
    chain, _ = record_failure(step.chain, candidates[1], CandidateError("busy", R.OVERLOADED))
    assert next_candidate(chain, lookup({}), NOW).candidate is None
    summary = fallback_summary(chain, NOW + 90)
    assert summary is not None
    assert summary.message == (
        "All models failed (2): openai/a: 429 (rate_limit) | anthropic/b: busy (overloaded)"
    )
    assert summary.soonest_cooldown_expiry == NOW + 90
    assert reply_failure_text(now=NOW, summary=summary) == (
        "⚠️ Rate-limited — ready in ~2 min. Please try again shortly."
    )


def test_single_attempt_has_no_summary() -> None:
    chain, candidates = _two()
    step = next_candidate(chain, lookup({}), NOW)
    chain, _ = record_failure(step.chain, candidates[0], CandidateError("x", R.AUTH))
    assert fallback_summary(chain) is None


# --- §8.2 cooldowns, probes (T52, §20.7) ----------------------------------------------------


def _primary_cooling(expiry: float, throttle: ProbeThrottle | None = None, scope: str = "main"):  # type: ignore[no-untyped-def]
    candidates = [ModelRef("openai", "a"), ModelRef("anthropic", "b")]
    chain = start_chain(candidates, scope=scope, throttle=throttle)
    return next_candidate(chain, lookup({"openai": cooling(R.RATE_LIMIT, expiry)}), NOW)


def test_t52_primary_far_from_expiry_is_skipped() -> None:
    step = _primary_cooling(NOW + 30 * 60)
    assert step.candidate == ModelRef("anthropic", "b")
    assert (
        step.chain.attempts[0].error == "Provider openai is in cooldown (all profiles unavailable)"
    )


def test_t52_primary_near_expiry_is_probed_then_throttled() -> None:
    step = _primary_cooling(NOW + 60)
    assert step.candidate == ModelRef("openai", "a")
    assert step.allow_transient_cooldown_probe
    throttle = step.chain.throttle
    again = _primary_cooling(NOW + 60, throttle)
    assert again.candidate == ModelRef("anthropic", "b")  # within 30 s: throttled
    other_scope = _primary_cooling(NOW + 60, throttle, scope="other")
    assert other_scope.candidate == ModelRef("openai", "a")  # throttling is per scope


def test_probe_throttle_reopens_after_30s_and_prunes() -> None:
    throttle = ProbeThrottle().marked("k", NOW)
    assert not throttle.is_open("k", NOW + 29)
    assert throttle.is_open("k", NOW + 30)
    many = ProbeThrottle({f"k{i}": NOW + i for i in range(256)}).marked("new", NOW + 500)
    assert len(many.last_probe) == 256 and "k0" not in many.last_probe


def test_t52_billing_primary_without_fallbacks_is_probed() -> None:
    chain = start_chain([ModelRef("openai", "a")])
    step = next_candidate(chain, lookup({"openai": cooling(R.BILLING, NOW + 3600)}), NOW)
    assert step.candidate == ModelRef("openai", "a")


def test_t52_billing_primary_with_fallbacks_far_from_expiry_is_skipped() -> None:
    chain = start_chain([ModelRef("openai", "a"), ModelRef("anthropic", "b")])
    step = next_candidate(chain, lookup({"openai": cooling(R.BILLING, NOW + 3600)}), NOW)
    assert step.candidate == ModelRef("anthropic", "b")
    assert step.chain.attempts[0].error == "Provider openai has billing issue (skipping all models)"


@pytest.mark.parametrize("reason", [R.AUTH, R.AUTH_PERMANENT])
def test_auth_problems_skip_the_provider(reason: R) -> None:
    chain = start_chain([ModelRef("openai", "a"), ModelRef("openai", "b"), ModelRef("x", "c")])
    step = next_candidate(chain, lookup({"openai": cooling(reason, NOW + 10)}), NOW)
    assert step.candidate == ModelRef("x", "c")
    assert [a.error for a in step.chain.attempts] == [
        f"Provider openai has {reason.value} issue (skipping all models)"
    ] * 2


def test_one_transient_probe_per_provider_per_run() -> None:
    candidates = [ModelRef("x", "primary"), ModelRef("openai", "a"), ModelRef("openai", "b")]
    table = lookup({"openai": cooling(R.RATE_LIMIT, NOW + 600)})
    step = next_candidate(start_chain(candidates), table, NOW)
    chain, _ = record_failure(step.chain, candidates[0], CandidateError("x", R.TIMEOUT))
    step = next_candidate(chain, table, NOW)
    assert step.candidate == candidates[1] and step.allow_transient_cooldown_probe
    chain, _ = record_failure(step.chain, candidates[1], CandidateError("429", R.RATE_LIMIT))
    step = next_candidate(chain, table, NOW)
    assert step.candidate is None
    assert step.chain.attempts[-1].error == (
        "Provider openai is in cooldown (probe already attempted this run)"
    )


def test_probe_failing_with_model_not_found_keeps_the_slot() -> None:
    candidates = [ModelRef("x", "primary"), ModelRef("openai", "a"), ModelRef("openai", "b")]
    table = lookup({"openai": cooling(R.OVERLOADED, NOW + 600)})
    step = next_candidate(start_chain(candidates), table, NOW)
    chain, _ = record_failure(step.chain, candidates[0], CandidateError("x", R.TIMEOUT))
    step = next_candidate(chain, table, NOW)
    chain, _ = record_failure(step.chain, candidates[1], CandidateError("nf", R.MODEL_NOT_FOUND))
    assert next_candidate(chain, table, NOW).candidate == candidates[2]


def test_non_primary_in_non_transient_cooldown_is_skipped() -> None:
    candidates = [ModelRef("x", "primary"), ModelRef("openai", "a")]
    table = lookup({"openai": cooling(R.FORMAT, NOW + 600)})
    step = next_candidate(start_chain(candidates), table, NOW)
    chain, _ = record_failure(step.chain, candidates[0], CandidateError("x", R.TIMEOUT))
    assert next_candidate(chain, table, NOW).candidate is None


def test_primary_not_requested_is_attempted_in_cooldown() -> None:
    """A session already on another model: the primary slot is not the originally requested."""
    candidates = [ModelRef("openai", "a"), ModelRef("x", "b")]
    chain = FallbackChain(candidates=tuple(candidates), requested=ModelRef("openai", "other"))
    step = next_candidate(chain, lookup({"openai": cooling(R.FORMAT, NOW + 3600)}), NOW)
    assert step.candidate == candidates[0] and not step.allow_transient_cooldown_probe


# --- §8.4 reply layer -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expiry", "text"),
    [
        (NOW + 45, "⚠️ Rate-limited — ready in ~45s. Please wait a moment."),
        (NOW + 60, "⚠️ Rate-limited — ready in ~60s. Please wait a moment."),
        (NOW + 61, "⚠️ Rate-limited — ready in ~2 min. Please try again shortly."),
        (NOW + 0.2, "⚠️ Rate-limited — ready in ~1s. Please wait a moment."),
        (NOW, RATE_LIMIT_GENERIC_REPLY),
        (None, RATE_LIMIT_GENERIC_REPLY),
    ],
)
def test_rate_limit_reply(expiry: float | None, text: str) -> None:
    assert rate_limit_cooldown_reply(expiry, NOW) == text


def test_reply_texts() -> None:
    assert reply_failure_text(now=NOW, reason=R.BILLING).startswith(
        "⚠️ API provider returned a billing error"
    )
    assert reply_failure_text(now=NOW, reason=R.RATE_LIMIT) == RATE_LIMIT_GENERIC_REPLY
    assert reply_failure_text(now=NOW, context_overflow=True).startswith(
        "⚠️ Context overflow — prompt too large for this model."
    )
    assert reply_failure_text(now=NOW, reason=R.AUTH).startswith("⚠️ Something went wrong")


def test_mixed_summary_is_not_a_rate_limit() -> None:
    chain, candidates = _two()
    step = next_candidate(chain, lookup({}), NOW)
    chain, _ = record_failure(step.chain, candidates[0], CandidateError("429", R.RATE_LIMIT))
    step = next_candidate(chain, lookup({}), NOW)
    chain, _ = record_failure(step.chain, candidates[1], CandidateError("401", R.AUTH))
    summary = fallback_summary(chain, NOW + 30)
    assert summary is not None
    assert reply_failure_text(now=NOW, summary=summary).startswith("⚠️ Something went wrong")
