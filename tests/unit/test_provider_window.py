"""The provider's own window (SPEC §5.6, issue 24): what is learned, remembered and said."""

from __future__ import annotations

from activities.context.compaction_plan import check_baseline
from workflows.policy.preemptive_check import PrecheckRoute, precheck
from workflows.policy.provider_window import (
    known_window,
    learn_window,
    merged_windows,
    provider_figures_text,
)

M = "anthropic/claude-16k"


def test_a_smaller_window_named_by_the_provider_is_learned() -> None:
    learned = learn_window(M, 6000, 16000, None)
    assert learned is not None and learned.window == 6000 and learned.configured == 16000
    assert "6000" in learned.warning() and "16000" in learned.warning()


def test_nothing_is_learned_without_a_figure_a_configured_window_or_anything_new() -> None:
    assert learn_window(M, None, 16000, None) is None
    assert learn_window(M, 6000, None, None) is None
    assert learn_window(M, 16000, 16000, None) is None  # not smaller than configured
    assert learn_window(M, 200000, 16000, None) is None
    assert learn_window(M, 6000, 16000, 6000) is None  # already known
    assert learn_window(M, 7000, 16000, 6000) is None  # a smaller one is known
    smaller = learn_window(M, 5000, 16000, 6000)
    assert smaller is not None and smaller.window == 5000


def test_the_session_keeps_each_models_smallest_window() -> None:
    assert known_window(M, {}, {}) is None
    assert known_window(M, {M: 8000}, {M: 6000}) == 6000
    assert known_window(M, {"openai/x": 4000}) is None
    merged = merged_windows({M: 8000, "openai/x": 4000}, {M: 6000, "openai/y": 0})
    assert merged == {M: 6000, "openai/x": 4000}
    assert merged_windows({M: 6000}, {M: 9000}) == {M: 6000}


def test_the_provider_figures_in_words() -> None:
    assert provider_figures_text("anthropic", 8391, 6000) == (
        "anthropic counted 8391 tokens against its context window of 6000"
    )
    assert provider_figures_text("openai", None, 6000) == (
        "openai enforces a context window of 6000 tokens"
    )
    assert provider_figures_text("openai", None, None) == ""


def test_the_provider_window_caps_the_prompt_budget_without_a_reserve_of_its_own() -> None:
    common = dict(
        history_tokens=4000,
        system_prompt_tokens=300,
        prompt_tokens=0,
        context_window=16000,
        reserve_tokens=20000,
        reducible_chars=0,
    )
    # 4 300 tokens (5 160 with the safety margin) fit the configured budget of 8 000...
    assert precheck(**common).route is PrecheckRoute.FITS  # type: ignore[arg-type]
    # ... and the provider's 6 000, though a 6 000 window's own budget (3 000) would not hold it.
    fits = precheck(**common, provider_window=6000)  # type: ignore[arg-type]
    assert fits.route is PrecheckRoute.FITS and fits.prompt_budget_tokens == 6000
    over = precheck(**common, provider_window=5000)  # type: ignore[arg-type]
    assert over.route is PrecheckRoute.COMPACT_ONLY and over.prompt_budget_tokens == 5000


def test_an_unfit_baseline_names_the_real_figures() -> None:
    budget = check_baseline(
        context_window=8000,
        system_prompt_tokens=600,
        summary_tokens=2400,
        kept_tokens=7000,
        full_window=16000,
    )
    assert budget.message is not None
    assert "more than the 8000 tokens the model's context window of 16000 leaves" in (
        budget.message
    )
    provider = check_baseline(
        context_window=6000,
        system_prompt_tokens=600,
        summary_tokens=500,
        kept_tokens=5500,
        provider_stated=True,
    )
    assert provider.message is not None
    assert "more than the context window the provider enforces, 6000 tokens" in provider.message
    fits = check_baseline(
        context_window=6000,
        system_prompt_tokens=600,
        summary_tokens=500,
        kept_tokens=3300,
        provider_stated=True,
    )
    assert fits.fits
