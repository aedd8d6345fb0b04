"""Thinking levels per provider, and refusals the SPEC §6 fallback picker can parse."""

from __future__ import annotations

import re

import pytest

from activities.providers.base import ProviderError
from activities.providers.thinking_params import (
    anthropic_thinking,
    check_thinking_supported,
    normalize_thinking_level,
    openai_reasoning_effort,
)


def pick_fallback(message: str, attempted: set[str]) -> str | None:
    """SPEC §6 steps 3-5, written from the spec, to prove our errors parse."""
    found = re.search(r"supported values(?: are)?:\s*([^\n.]*)", message, re.IGNORECASE)
    if not found:
        if "not supported" in message.lower() and "off" not in attempted:
            return "off"
        return None
    raw = found.group(1)
    quoted = re.findall(r"[\"']([^\"']+)[\"']", raw)
    values = quoted or [re.sub(r"[^a-z]", "", v.lower()) for v in re.split(r",|\band\b", raw)]
    for value in values:
        level = normalize_thinking_level(value)
        if level and level not in attempted:
            return level
    return None


def _refusal(level: str, supported: list[str]) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        check_thinking_supported(level, supported, provider="anthropic", model="claude-x-4.5")
    return caught.value


def test_unsupported_level_is_a_400_with_parseable_values() -> None:
    err = _refusal("high", ["off", "low"])
    assert (err.status, err.code, err.transport) == (400, "unsupported_thinking_level", False)
    assert err.message.startswith('think value "high" is not supported')
    assert 'Supported values are: "low", "off".' in err.message
    assert pick_fallback(err.message, {"high"}) == "low"
    assert pick_fallback(err.message, {"high", "low"}) == "off"
    assert pick_fallback(err.message, {"high", "low", "off"}) is None


def test_values_are_listed_nearest_first() -> None:
    err = _refusal("xhigh", ["off", "minimal", "low", "medium", "high"])
    assert 'Supported values are: "high", "medium", "low", "minimal", "off".' in err.message
    err = _refusal("minimal", ["low", "medium"])
    assert 'Supported values are: "off", "low", "medium".' in err.message


def test_spec_examples_parse() -> None:
    assert pick_fallback('Supported values are: "high", "medium"', set()) == "high"
    assert pick_fallback('Supported values are: "high", "medium"', {"high"}) == "medium"
    assert pick_fallback('400 think value "low" is not supported for this model', set()) == "off"
    assert pick_fallback('400 think value "low" is not supported for this model', {"off"}) is None


def test_supported_levels_and_off_pass() -> None:
    check_thinking_supported("off", ["low"], provider="p", model="m")
    check_thinking_supported("medium", ["low", "medium"], provider="p", model="m")
    with pytest.raises(ProviderError, match="not a thinking level"):
        check_thinking_supported("turbo", ["low"], provider="p", model="m")


@pytest.mark.parametrize(
    ("level", "max_tokens", "expected"),
    [
        ("off", 8000, (None, 8000)),
        ("minimal", 8000, ({"type": "enabled", "budget_tokens": 1024}, 8000)),
        ("low", 8000, ({"type": "enabled", "budget_tokens": 4096}, 8000)),
        ("medium", 64000, ({"type": "enabled", "budget_tokens": 8192}, 64000)),
        ("high", 64000, ({"type": "enabled", "budget_tokens": 16384}, 64000)),
        ("xhigh", 64000, ({"type": "enabled", "budget_tokens": 32768}, 64000)),
        ("high", 4096, ({"type": "enabled", "budget_tokens": 16384}, 16384 + 4096)),
        ("adaptive", 8000, ({"type": "adaptive"}, 8000)),
    ],
)
def test_anthropic_budgets(level: str, max_tokens: int, expected: tuple[object, int]) -> None:
    assert anthropic_thinking(level, max_tokens) == expected


def test_openai_efforts() -> None:
    assert openai_reasoning_effort("low", ["low", "high"]) == "low"
    assert openai_reasoning_effort("xhigh", ["xhigh"]) == "xhigh"
    assert openai_reasoning_effort("off", ["off"]) is None  # not a reasoning model
    assert openai_reasoning_effort("off", ["off", "low"]) is None  # never "none": often refused
    assert openai_reasoning_effort("off", ["low", "medium"]) is None  # always reasons
    assert openai_reasoning_effort("adaptive", ["adaptive"]) is None


def test_user_words_normalise() -> None:
    assert normalize_thinking_level("ON") == "low"
    assert normalize_thinking_level("ultrathink") == "high"
    assert normalize_thinking_level("extra-high") == "xhigh"
    assert normalize_thinking_level("auto") == "adaptive"
    assert normalize_thinking_level("banana") is None
