"""Preemptive context check before a prompt is sent (SPEC §10.3).

Pure arithmetic over numbers the caller measured (token estimates of the history, the system
prompt and the new prompt; the tool-result characters a recovery truncation could remove, from
`activities.context.tool_result_truncation.reducible_tool_result_chars`), so the workflow can run
it without touching the transcript.

* estimated prompt tokens = ceil((history + system prompt + new prompt) × 1.2), plus, unpadded,
  the part of the history the provider itself counted (its reported usage of the last call:
  the truth needs no safety margin; issue 10's calibration)
* effective reserve = min(reserve, max(0, window − min(8 000, max(1, floor(window × 0.5)))))
* prompt budget = max(1, window − effective reserve); overflow = max(0, estimate − budget)
* route: no overflow → fits; nothing reducible → compact_only; reducible ≥
  max(overflow × 4 + 2 048, ceil(overflow × 4 × 1.5)) → truncate_tool_results_only; else
  compact_then_truncate.

What each route asks of the run loop: `truncate_tool_results_only` truncates in the session and,
if that changed something, retries without sending the prompt (a failed truncation falls back to
`compact_only`); the two compaction routes skip the prompt and enter
overflow recovery (§4.5) with `PRECHECK_OVERFLOW_TEXT` as the prompt error, the mixed route also
truncating after a successful compaction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

PRECHECK_OVERFLOW_TEXT: Final = "Context overflow: prompt too large for the model (precheck)."
# Token estimates run low on code and non-English text; the precheck pads them by 20 %.
SAFETY_MARGIN: Final = 1.2
CHARS_PER_TOKEN: Final = 4
# The reserve never eats more than this much of the window (small windows keep room to answer
# without the reserve swallowing the prompt).
MAX_RESERVE_SHARE_TOKENS: Final = 8_000
TRUNCATION_BUFFER_CHARS: Final = 2_048
TRUNCATION_OVERSHOOT: Final = 1.5


class PrecheckRoute(StrEnum):
    FITS = "fits"
    COMPACT_ONLY = "compact_only"
    TRUNCATE_TOOL_RESULTS_ONLY = "truncate_tool_results_only"
    COMPACT_THEN_TRUNCATE = "compact_then_truncate"


@dataclass(frozen=True)
class PrecheckResult:
    route: PrecheckRoute
    estimated_prompt_tokens: int
    effective_reserve_tokens: int
    prompt_budget_tokens: int
    overflow_tokens: int
    reducible_chars: int
    truncate_only_threshold_chars: int

    @property
    def should_compact(self) -> bool:
        return self.route in (PrecheckRoute.COMPACT_ONLY, PrecheckRoute.COMPACT_THEN_TRUNCATE)

    @property
    def should_truncate(self) -> bool:
        return self.route in (
            PrecheckRoute.TRUNCATE_TOOL_RESULTS_ONLY,
            PrecheckRoute.COMPACT_THEN_TRUNCATE,
        )


def estimate_prompt_tokens(
    history_tokens: int, system_prompt_tokens: int, prompt_tokens: int, reported_tokens: int = 0
) -> int:
    total = max(0, history_tokens) + max(0, system_prompt_tokens) + max(0, prompt_tokens)
    return math.ceil(total * SAFETY_MARGIN) + max(0, reported_tokens)


def effective_reserve_tokens(context_window: int, reserve_tokens: int) -> int:
    window = max(0, context_window)
    kept_for_prompt = min(MAX_RESERVE_SHARE_TOKENS, max(1, window // 2))
    return max(0, min(reserve_tokens, max(0, window - kept_for_prompt)))


def prompt_budget_tokens(context_window: int, reserve_tokens: int) -> int:
    return max(1, context_window - effective_reserve_tokens(context_window, reserve_tokens))


def truncate_only_threshold_chars(overflow_tokens: int) -> int:
    """Truncation alone must free the overflow with room to spare: 2 048 characters or half as
    much again, whichever is more."""
    overflow_chars = overflow_tokens * CHARS_PER_TOKEN
    return max(
        overflow_chars + TRUNCATION_BUFFER_CHARS,
        math.ceil(overflow_chars * TRUNCATION_OVERSHOOT),
    )


def precheck(
    *,
    history_tokens: int,
    system_prompt_tokens: int,
    prompt_tokens: int,
    context_window: int,
    reserve_tokens: int,
    reducible_chars: int,
    reported_tokens: int = 0,
    provider_window: int | None = None,
) -> PrecheckResult:
    """The §10.3 route for the next prompt.

    `provider_window`: the window the provider said it enforces (SPEC §5.6) when smaller than
    `context_window`. It is a hard limit on the prompt, not a window to keep a reserve in: the
    budget is the configured window's, capped by it (the reserve of a window the provider
    shrank would leave no room for the turn in progress)."""
    estimate = estimate_prompt_tokens(
        history_tokens, system_prompt_tokens, prompt_tokens, reported_tokens
    )
    reserve = effective_reserve_tokens(context_window, reserve_tokens)
    budget = max(1, context_window - reserve)
    if provider_window is not None and provider_window > 0:
        budget = min(budget, provider_window)
    overflow = max(0, estimate - budget)
    threshold = truncate_only_threshold_chars(overflow)
    reducible = max(0, reducible_chars)
    if overflow == 0:
        route = PrecheckRoute.FITS
    elif reducible == 0:
        route = PrecheckRoute.COMPACT_ONLY
    elif reducible >= threshold:
        route = PrecheckRoute.TRUNCATE_TOOL_RESULTS_ONLY
    else:
        route = PrecheckRoute.COMPACT_THEN_TRUNCATE
    return PrecheckResult(
        route=route,
        estimated_prompt_tokens=estimate,
        effective_reserve_tokens=reserve,
        prompt_budget_tokens=budget,
        overflow_tokens=overflow,
        reducible_chars=reducible,
        truncate_only_threshold_chars=threshold,
    )
