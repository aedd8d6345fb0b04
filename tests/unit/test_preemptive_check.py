"""Preemptive context check (SPEC §10.3, and the precheck half of T28 in §18.4)."""

from __future__ import annotations

import pytest

from tests.unit.import_probe import imported_with
from workflows.policy.preemptive_check import (
    PRECHECK_OVERFLOW_TEXT,
    PrecheckResult,
    PrecheckRoute,
    effective_reserve_tokens,
    estimate_prompt_tokens,
    precheck,
    prompt_budget_tokens,
    truncate_only_threshold_chars,
)


def check(
    history: int, *, reducible: int = 0, window: int = 32_000, reserve: int = 20_000
) -> PrecheckResult:
    return precheck(
        history_tokens=history,
        system_prompt_tokens=0,
        prompt_tokens=0,
        context_window=window,
        reserve_tokens=reserve,
        reducible_chars=reducible,
    )


def test_spec_example_small_window_caps_the_reserve() -> None:
    # "window 16 000 with reserve 20 000 → effective reserve 8 000, budget 8 000"
    assert effective_reserve_tokens(16_000, 20_000) == 8_000
    assert prompt_budget_tokens(16_000, 20_000) == 8_000


def test_spec_example_larger_window_keeps_the_reserve() -> None:
    # "window 32 000 with reserve 20 000 → reserve kept, budget 12 000"
    assert effective_reserve_tokens(32_000, 20_000) == 20_000
    assert prompt_budget_tokens(32_000, 20_000) == 12_000


@pytest.mark.parametrize(
    ("window", "reserve", "expected"),
    [
        (200_000, 20_000, 20_000),
        (200_000, 0, 0),
        (10_000, 20_000, 5_000),  # floor(window × 0.5) is kept for the prompt below 16 000
        (1, 20_000, 0),
        (0, 20_000, 0),
    ],
)
def test_effective_reserve(window: int, reserve: int, expected: int) -> None:
    assert effective_reserve_tokens(window, reserve) == expected
    assert prompt_budget_tokens(window, reserve) == max(1, window - expected)


def test_estimate_adds_twenty_percent_rounded_up() -> None:
    assert estimate_prompt_tokens(1_000, 200, 50) == 1_500
    assert estimate_prompt_tokens(1, 0, 0) == 2
    assert estimate_prompt_tokens(0, 0, 0) == 0


def test_fits_when_the_estimate_is_within_budget() -> None:
    result = check(10_000)  # 12 000 after the margin, budget 12 000
    assert result.route is PrecheckRoute.FITS
    assert result.overflow_tokens == 0
    assert not result.should_compact and not result.should_truncate


def test_overflow_without_tool_results_compacts_only() -> None:
    result = check(10_001)
    assert result.estimated_prompt_tokens == 12_002
    assert result.overflow_tokens == 2
    assert result.route is PrecheckRoute.COMPACT_ONLY
    assert result.should_compact and not result.should_truncate


def test_enough_reducible_chars_truncate_only() -> None:
    # ceil(10 834 × 1.2) = 13 001 against a budget of 12 000: overflow 1 001 tokens, so the
    # threshold is max(4 004 + 2 048, 6 006) = 6 052 characters.
    result = check(10_834, reducible=10_000)
    assert result.overflow_tokens == 1_001
    assert result.truncate_only_threshold_chars == 6_052
    assert result.route is PrecheckRoute.TRUNCATE_TOOL_RESULTS_ONLY
    assert result.should_truncate and not result.should_compact


def test_threshold_boundary() -> None:
    assert truncate_only_threshold_chars(1_000) == 6_048  # the buffer wins on small overflows
    assert truncate_only_threshold_chars(10_000) == 60_000  # the 1.5 factor wins on large ones
    just_enough = check(20_000, reducible=truncate_only_threshold_chars(12_000))
    assert just_enough.overflow_tokens == 12_000
    assert just_enough.route is PrecheckRoute.TRUNCATE_TOOL_RESULTS_ONLY
    one_short = check(20_000, reducible=truncate_only_threshold_chars(12_000) - 1)
    assert one_short.route is PrecheckRoute.COMPACT_THEN_TRUNCATE
    assert one_short.should_compact and one_short.should_truncate


def test_negative_inputs_are_treated_as_zero() -> None:
    result = precheck(
        history_tokens=-5,
        system_prompt_tokens=-1,
        prompt_tokens=0,
        context_window=32_000,
        reserve_tokens=20_000,
        reducible_chars=-10,
    )
    assert result.route is PrecheckRoute.FITS
    assert result.reducible_chars == 0


def test_overflow_text_is_an_overflow_text() -> None:
    assert PRECHECK_OVERFLOW_TEXT == "Context overflow: prompt too large for the model (precheck)."


def test_policy_imports_nothing_with_side_effects() -> None:
    assert (
        imported_with(
            ["workflows.policy.preemptive_check"],
            ("activities", "httpx", "anthropic", "openai", "temporalio"),
        )
        == []
    )
