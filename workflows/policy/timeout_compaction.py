"""Timeout-triggered compaction (SPEC §4.6.4, cases T30/T31 of §18.5), and the compaction request
every trigger hands to the compaction activity (§4.5 step 2, §11.1).

A timed-out attempt whose context was large is likely slow because it is large: compact and try
again. Conditions: the attempt timed out, not while compacting; fewer than 2 timeout compactions
so far in this run (also across profile rotations); and the prompt-side tokens of the latest
call (input + cache read + cache write, never output) exceed 65 % of the window. An attempt
counts toward the cap whether or not the compaction then succeeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from workflows.policy.failover import MAX_TIMEOUT_COMPACTION_ATTEMPTS

TIMEOUT_COMPACTION_RATIO: Final = 0.65


class CompactionTrigger(StrEnum):
    OVERFLOW = "overflow"  # §4.5 step 2
    TIMEOUT_RECOVERY = "timeout_recovery"  # §4.6.4
    PRECHECK = "precheck"  # §10.3
    THRESHOLD = "threshold"  # §11.1 trigger 1: the context reached into the reserve
    MANUAL = "manual"  # /compact


@dataclass(frozen=True)
class CompactionRequest:
    """What the run loop asks of the compaction activity: compact even below the usual
    threshold (`force`) until the context fits `token_budget`."""

    trigger: CompactionTrigger
    token_budget: int
    attempt: int
    max_attempts: int
    force: bool = True
    target: str = "budget"
    # The provider's own count of the overflowing prompt, when its error said (§5.6).
    observed_tokens: int | None = None
    instructions: str | None = None


@dataclass(frozen=True)
class TimeoutCompactionDecision:
    request: CompactionRequest | None
    prompt_ratio: float
    reason: str

    @property
    def compact(self) -> bool:
        return self.request is not None


def decide_timeout_compaction(
    *,
    timed_out: bool,
    timed_out_during_compaction: bool,
    attempts_so_far: int,
    prompt_tokens: int,
    context_window: int,
) -> TimeoutCompactionDecision:
    """Whether a timed-out attempt compacts before retrying (§4.6.4); `attempts_so_far` counts
    timeout compactions already made in this run, `prompt_tokens` is the latest call's
    `Usage.prompt_tokens`."""
    ratio = prompt_tokens / context_window if context_window > 0 else 0.0
    if not timed_out:
        return TimeoutCompactionDecision(None, ratio, "not a timeout")
    if timed_out_during_compaction:
        return TimeoutCompactionDecision(None, ratio, "timed out during compaction")
    if attempts_so_far >= MAX_TIMEOUT_COMPACTION_ATTEMPTS:
        return TimeoutCompactionDecision(None, ratio, "timeout compactions exhausted")
    if ratio <= TIMEOUT_COMPACTION_RATIO:
        return TimeoutCompactionDecision(None, ratio, "prompt below 65% of the window")
    request = CompactionRequest(
        trigger=CompactionTrigger.TIMEOUT_RECOVERY,
        token_budget=context_window,
        attempt=attempts_so_far + 1,
        max_attempts=MAX_TIMEOUT_COMPACTION_ATTEMPTS,
    )
    return TimeoutCompactionDecision(request, ratio, "large prompt timed out")
