"""Thinking-level normalisation and fallback (SPEC §6, §18.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.import_probe import imported_with
from workflows.policy.thinking_fallback import (
    normalize_thinking_level,
    pick_fallback_thinking_level,
    supported_thinking_values,
)

REPO_ROOT = Path(__file__).resolve().parents[2]

# --- §18.2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "attempted", "expected"),
    [
        pytest.param('Supported values are: "high", "medium"', set(), "high", id="T15-first"),
        pytest.param('Supported values are: "high", "medium"', {"high"}, "medium", id="T15-next"),
        pytest.param(
            '400 think value "low" is not supported for this model', set(), "off", id="T15-off"
        ),
        pytest.param(
            '400 think value "low" is not supported for this model', {"off"}, None, id="T15-none"
        ),
    ],
)
def test_t15_pick_fallback(message: str, attempted: set[str], expected: str | None) -> None:
    assert pick_fallback_thinking_level(message, attempted) == expected


# --- §6 normalisation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        *[(level, level) for level in ("off", "minimal", "low", "medium", "high", "xhigh")],
        ("adaptive", "adaptive"),
        ("on", "low"),
        ("enable", "low"),
        ("enabled", "low"),
        ("min", "minimal"),
        ("think", "minimal"),
        ("mid", "medium"),
        ("med", "medium"),
        ("thinkharder", "medium"),
        ("harder", "medium"),
        ("ultra", "high"),
        ("ultrathink", "high"),
        ("highest", "high"),
        ("max", "high"),
        ("auto", "adaptive"),
        ("extrahigh", "xhigh"),
        # Case, surrounding space and word separators do not matter.
        ("  HIGH ", "high"),
        ("Think Harder", "medium"),
        ("extra-high", "xhigh"),
        ("x_high", "xhigh"),
        ("ultra think", "high"),
    ],
)
def test_normalize_known_words(word: str, expected: str) -> None:
    assert normalize_thinking_level(word) == expected


@pytest.mark.parametrize("word", ["", None, "none", "very high", "disabled", "lowest", "5"])
def test_normalize_unknown_words(word: str | None) -> None:
    assert normalize_thinking_level(word) is None


# --- §6 steps 1-5 ---------------------------------------------------------------------------

REASONING_MANDATORY = "400 Reasoning is mandatory for this endpoint and cannot be disabled."


@pytest.mark.parametrize(
    ("message", "attempted", "expected"),
    [
        pytest.param("", set(), None, id="step1-empty"),
        pytest.param("   \n", set(), None, id="step1-blank"),
        pytest.param(REASONING_MANDATORY, set(), "minimal", id="step2-mandatory"),
        pytest.param("Reasoning is required for this model", {"off"}, "minimal", id="step2-req"),
        pytest.param("This model requires reasoning", set(), "minimal", id="step2-requires"),
        pytest.param(
            "reasoning effort cannot be disabled on o3", set(), "minimal", id="step2-cannot-disable"
        ),
        pytest.param(REASONING_MANDATORY, {"minimal"}, None, id="step2-minimal-tried"),
        pytest.param(
            'Reasoning is mandatory. Supported values are: "low", "high"',
            {"minimal"},
            "low",
            id="step2-tried-then-list",
        ),
        pytest.param(
            "Supported values: low, medium and high.", {"low"}, "medium", id="step3-unquoted"
        ),
        pytest.param(
            "supported values are: 'low', 'high'", {"low", "high"}, None, id="step5-all-tried"
        ),
        pytest.param("Supported values are: max, auto", set(), "high", id="step3-aliases"),
        pytest.param(
            'Supported values are: "none", "low"', set(), "low", id="step3-unknown-skipped"
        ),
        pytest.param(
            'Supported values are: "low". Also "high" works', {"low"}, None, id="step3-period-ends"
        ),
        pytest.param('Supported values are: "low"\n"high"', {"low"}, None, id="step3-newline-ends"),
        pytest.param(
            "thinking budget not supported", set(), "off", id="step4-not-supported-means-off"
        ),
        pytest.param("model overloaded", set(), None, id="step4-unrelated"),
        pytest.param('Supported values are: "high"', {"max"}, None, id="attempted-alias-counts"),
    ],
)
def test_pick_fallback_steps(message: str, attempted: set[str], expected: str | None) -> None:
    assert pick_fallback_thinking_level(message, attempted) == expected


def test_supported_values_keep_provider_order() -> None:
    message = "Invalid reasoning_effort. Supported values are: 'minimal', 'low', 'medium', 'high'."
    assert supported_thinking_values(message) == ["minimal", "low", "medium", "high"]


def test_supported_values_absent() -> None:
    assert supported_thinking_values("think value is not supported") == []


def test_module_is_workflow_sandbox_safe() -> None:
    """The workflow imports this module, so it must not drag in activity code or I/O modules."""
    assert (
        imported_with(
            ["workflows.policy.thinking_fallback"],
            ("activities", "httpx", "anthropic", "openai", "temporalio", "pydantic"),
        )
        == []
    )
