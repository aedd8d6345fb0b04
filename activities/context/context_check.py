"""The preemptive context check of a request about to be sent (SPEC §10.3, §10.2), measured here
and decided by `workflows/policy/preemptive_check.precheck`.

The history's size is the provider's own count of the last call's context (its reported usage,
exact) plus an estimate of what was written after it; without a usable report, everything is
estimated, the system prompt and tool schemas included. A request that would not fit is not
sent: the model-call activity reports a context overflow with the route, and the run recovers
(compaction, truncation) before trying again.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.context.request_context import RequestContext
from activities.context.token_estimate import calibrated_context_tokens
from activities.context.tool_result_truncation import (
    TRUNCATED_META_KEY,
    reducible_tool_result_chars,
)
from workflows.policy.preemptive_check import PrecheckResult, PrecheckRoute, precheck


@dataclass(frozen=True)
class ContextCheck:
    # §10.3's figures; `reducible_chars` is measured only when a recovery route needs it.
    result: PrecheckResult
    # The live guard (§10.2) found the context over 90 % of the window.
    guard_overflow: bool
    # The request's size without the safety margin: what §4.6.4 compares with the window.
    prompt_tokens: int = 0

    @property
    def route(self) -> PrecheckRoute:
        if self.result.route is PrecheckRoute.FITS and self.guard_overflow:
            if self.result.reducible_chars:
                return PrecheckRoute.COMPACT_THEN_TRUNCATE
            return PrecheckRoute.COMPACT_ONLY
        return self.result.route

    @property
    def fits(self) -> bool:
        return self.route is PrecheckRoute.FITS


def usage_valid_from(context: RequestContext) -> int:
    """The first entry whose call's reported usage may measure this request (`anchor`)."""
    # Entries the repair added or dropped shift indices a little; the anchor is an assistant
    # entry, which repair keeps, so searching from the view's index is close enough.
    fresh_from = context.view.fresh_from if context.view is not None else 0
    # A call's reported usage counted an entry the guard now sends cut (a result, or the long
    # arguments of its own calls, counted in its output): it describes a bigger context than
    # this request's, so only a call after the last cut entry may anchor.
    last_cut = max(
        (i for i, e in enumerate(context.entries) if TRUNCATED_META_KEY in e.meta), default=-1
    )
    return max(fresh_from, last_cut + 1)


def check_context(
    context: RequestContext,
    *,
    overhead_tokens: int,
    context_window: int,
    reserve_tokens: int,
    provider_window: int | None = None,
) -> ContextCheck:
    counted = calibrated_context_tokens(context.entries, usage_valid_from=usage_valid_from(context))

    def checked(reducible_chars: int) -> PrecheckResult:
        return precheck(
            history_tokens=counted.estimated,
            system_prompt_tokens=0 if counted.reported else overhead_tokens,
            prompt_tokens=0,
            context_window=context_window,
            reserve_tokens=reserve_tokens,
            reducible_chars=reducible_chars,
            reported_tokens=counted.reported,
            provider_window=provider_window,
        )

    # What a recovery truncation could free only chooses among recovery routes, and planning it
    # passes over every tool result of the context (cutting texts): a request that fits, the
    # common case, skips it, so its `result.reducible_chars` is 0, not measured.
    result = checked(0)
    if result.route is not PrecheckRoute.FITS or context.overflow:
        result = checked(reducible_tool_result_chars(context.entries, context_window))
    prompt_tokens = counted.tokens + (0 if counted.reported else overhead_tokens)
    return ContextCheck(result=result, guard_overflow=context.overflow, prompt_tokens=prompt_tokens)
