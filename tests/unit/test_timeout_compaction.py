"""Timeout-triggered compaction (SPEC §4.6.4; T30, T31 of §18.5)."""

from __future__ import annotations

from agentlane.usage import Usage
from tests.unit.import_probe import imported_with
from workflows.policy.timeout_compaction import (
    CompactionTrigger,
    TimeoutCompactionDecision,
    decide_timeout_compaction,
)


def decide(
    usage: Usage,
    *,
    attempts: int = 0,
    timed_out: bool = True,
    during_compaction: bool = False,
    window: int = 200_000,
) -> TimeoutCompactionDecision:
    return decide_timeout_compaction(
        timed_out=timed_out,
        timed_out_during_compaction=during_compaction,
        attempts_so_far=attempts,
        prompt_tokens=usage.prompt_tokens,
        context_window=window,
    )


def test_t30_large_prompt_compacts_with_force_budget_and_timeout_trigger() -> None:
    decision = decide(Usage(input=150_000))
    assert decision.compact
    request = decision.request
    assert request is not None
    assert request.force and request.target == "budget"
    assert request.token_budget == 200_000
    assert request.trigger is CompactionTrigger.TIMEOUT_RECOVERY
    assert (request.attempt, request.max_attempts) == (1, 2)
    assert decision.prompt_ratio == 0.75


def test_t31_small_prompt_does_not_compact() -> None:
    decision = decide(Usage(input=20_000))
    assert not decision.compact
    assert decision.reason == "prompt below 65% of the window"


def test_t31_timeout_during_compaction_does_not_compact() -> None:
    assert not decide(Usage(input=150_000), during_compaction=True).compact


def test_t31_ratio_uses_prompt_side_tokens_only() -> None:
    assert not decide(Usage(input=10_000, output=190_000)).compact
    cached = decide(Usage(input=10_000, cache_read=100_000, cache_write=31_000))
    assert cached.compact  # 141 000 prompt-side tokens


def test_at_most_two_per_run() -> None:
    second = decide(Usage(input=150_000), attempts=1).request
    assert second is not None and second.attempt == 2
    exhausted = decide(Usage(input=150_000), attempts=2)
    assert not exhausted.compact and exhausted.reason == "timeout compactions exhausted"


def test_ratio_boundary_and_odd_inputs() -> None:
    assert not decide(Usage(input=130_000)).compact  # exactly 0.65 is not above it
    assert decide(Usage(input=130_001)).compact
    assert not decide(Usage(input=150_000), timed_out=False).compact
    assert not decide(Usage(input=150_000), window=0).compact


def test_policy_imports_nothing_with_side_effects() -> None:
    assert (
        imported_with(
            ["workflows.policy.timeout_compaction"],
            ("activities", "httpx", "anthropic", "openai", "temporalio"),
        )
        == []
    )
