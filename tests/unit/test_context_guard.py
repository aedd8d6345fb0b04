"""Context window guard (SPEC §9, T22 of §18.3)."""

from __future__ import annotations

import pytest

from agentlane.errors import FailoverReason
from workflows.policy.context_guard import evaluate_context_window


def test_t22_below_16000_blocks_before_any_call() -> None:
    result = evaluate_context_window(8192, provider="ollama", model="small")
    assert result.blocked
    assert result.block_message == "Model context window too small (8192 tokens). Minimum is 16000."
    assert result.block_reason is FailoverReason.UNKNOWN
    assert result.warning is not None


@pytest.mark.parametrize("tokens", [16_000, 31_999])
def test_between_16000_and_32000_warns_only(tokens: int) -> None:
    result = evaluate_context_window(tokens, provider="p", model="m", source="agentContextTokens")
    assert not result.blocked
    assert result.warning == (
        f"low context window: p/m ctx={tokens} (warn<32000) source=agentContextTokens"
    )


@pytest.mark.parametrize("tokens", [32_000, 200_000, 0, -5])
def test_large_or_unknown_window_passes(tokens: int) -> None:
    result = evaluate_context_window(tokens, provider="p", model="m")
    assert not result.blocked
    assert result.warning is None


def test_fractional_window_is_floored() -> None:
    assert evaluate_context_window(15_999.9, provider="p", model="m").tokens == 15_999
