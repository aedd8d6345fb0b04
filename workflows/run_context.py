"""What a run does when its context does not fit (SPEC §4.5, §4.6.4, §10.3; issue 10).

The Temporal half of context recovery: run the compaction and truncation activities, count the
steps, tell watchers and the Temporal UI. Every decision is a call into `workflows/policy/`:

* `after_overflow`, for a context overflow (the provider's, or the preemptive check's, which
  names a route): up to 3 compactions, then the one-shot tool-result truncation, then an error
  that says what to do. A provider text that says its own compaction failed skips compaction;
  a compaction whose must-keep baseline cannot fit stops at once instead of spiralling. An
  overflow never falls back to another model (the next model would overflow too).
* `after_timeout`, for a timed-out call whose last prompt filled most of the window: compact
  and make the call again (at most twice per run).

Every step counts toward the run's iteration bound, like a failover step. While a compaction
runs the run's phase is `compacting`; steering that arrives meanwhile waits for the next model
call, which sees it after the summary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agentlane.context_ops import (
        COMPACT_CONTEXT,
        TRUNCATE_TOOL_RESULTS,
        CompactionInput,
        CompactionOutcome,
        CompactionResult,
        TruncationInput,
        TruncationResult,
    )
    from agentlane.context_state import RunContextState
    from agentlane.errors import CONFIG_ERROR, ExecutionErrorKind, ModelFailure
    from agentlane.events import EventKind
    from agentlane.ids import chain_token_of
    from agentlane.run import (
        ExecutionError,
        ExecutionRequest,
        ModelRef,
        RunCarry,
        TerminationReason,
    )
    from agentlane.session import RunPhase
    from agentlane.settings import model_task_queue
    from workflows import activity_options as opts
    from workflows.loop_end import LoopEnd
    from workflows.policy.failover import (
        CONTEXT_OVERFLOW_TEXT,
        DecisionKind,
        FailoverCounters,
        OverflowFacts,
        decide_context_overflow,
        decide_overflow_after_failed_compaction,
        retry_limit_message,
        run_loop_iteration_limit,
    )
    from workflows.policy.failure_text import in_this_engine
    from workflows.policy.preemptive_check import PrecheckRoute
    from workflows.policy.provider_window import (
        known_window,
        learn_window,
        provider_figures_text,
    )
    from workflows.policy.timeout_compaction import (
        CompactionTrigger,
        TimeoutCompactionDecision,
        decide_timeout_compaction,
    )

# Runs recorded before context recovery ended at their first overflow.
CONTEXT_RECOVERY_PATCH = "context-recovery"
# The compaction activity bounds itself (`[compaction] timeout_seconds`, 5 min by default);
# this is the backstop for a worker that dies in the middle.
COMPACTION_START_TO_CLOSE = timedelta(minutes=15)
CONTEXT_STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=[CONFIG_ERROR],
)


class ContextHost(Protocol):
    req: ExecutionRequest
    c: RunCarry
    phase: RunPhase

    def _emit(self, kind: EventKind, turn_index: int | None = None, **fields: object) -> None: ...

    def show(self, text: str) -> None: ...

    def window_cap(self) -> int | None: ...


class ContextRecovery:
    def __init__(self, host: ContextHost, model: Callable[[], ModelRef]) -> None:
        self.h = host
        # The run's current model (a fallback model once the run fell back).
        self.model = model

    @property
    def s(self) -> RunContextState:
        if self.h.c.context is None:
            self.h.c.context = RunContextState()
        return self.h.c.context

    # -- overflow ----------------------------------------------------------------------------

    async def after_overflow(self, failure: ModelFailure) -> LoopEnd | None:
        """None: make the call again (something was compacted or cut); a LoopEnd: give up."""
        ended = self._count_step()
        if ended is not None:
            return ended
        self._learn_window(failure)
        s = self.s
        route = failure.precheck_route
        if route == PrecheckRoute.TRUNCATE_TOOL_RESULTS_ONLY.value and not s.truncation_tried:
            # §10.3: truncation alone frees enough; compaction only if it cut nothing.
            s.truncation_tried = True
            if await self._truncate(failure):
                return None
        facts = OverflowFacts(
            compaction_failure=failure.compaction_failure,
            oversized_tool_results=failure.oversized_tool_results,
        )
        counters = FailoverCounters(
            overflow_compactions=s.overflow_compactions,
            tool_result_truncation_tried=s.truncation_tried,
        )
        decision = decide_context_overflow(facts, counters)
        why = ""
        if decision.kind is DecisionKind.COMPACT:
            s.overflow_compactions = decision.counters.overflow_compactions
            result = await self._compact(
                CompactionTrigger.PRECHECK if route else CompactionTrigger.OVERFLOW,
                failure,
                attempt=s.overflow_compactions,
            )
            if result.compacted:
                if route == PrecheckRoute.COMPACT_THEN_TRUNCATE.value and not s.truncation_tried:
                    s.truncation_tried = True
                    await self._truncate(failure)
                return None
            why = result.message
            if result.outcome is CompactionOutcome.BASELINE_TOO_LARGE and not (
                facts.oversized_tool_results and not s.truncation_tried
            ):
                return self._overflow_end(result.message, failure)
            decision = decide_overflow_after_failed_compaction(facts, decision.counters)
        if decision.kind is DecisionKind.TRUNCATE:
            s.truncation_tried = True
            if await self._truncate(failure):
                return None
        return self._overflow_end(why, failure)

    def provider_window(self) -> int | None:
        """The window the current model's provider said it enforces, learned by this run or
        remembered by the session (None: only the configured window is known)."""
        return known_window(
            self.model().label(), self.h.c.provider_windows, self.h.req.provider_windows
        )

    def _learn_window(self, failure: ModelFailure) -> None:
        """SPEC §5.6: the provider named a window smaller than the configured one: compact to
        fit it from now on, and say so once."""
        label = self.model().label()
        configured = self.h.req.context_window if self.model() == self.h.req.model else None
        learned = learn_window(label, failure.observed_limit, configured, self.provider_window())
        if learned is None:
            return
        self.h.c.provider_windows = {**self.h.c.provider_windows, label: learned.window}
        self.h._emit(
            EventKind.WARNING,
            text=learned.warning(),
            data={
                "code": "provider_window",
                "model": label,
                "window": learned.window,
                "configured": learned.configured,
            },
        )

    def _count_step(self) -> LoopEnd | None:
        c = self.h.c
        c.failover_iterations += 1
        limit = run_loop_iteration_limit(len(c.profile_candidates or []) or 1)
        if c.failover_iterations <= limit:
            return None
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(
                kind=ExecutionErrorKind.CONTEXT_OVERFLOW,
                message=retry_limit_message(c.failover_iterations, limit),
            ),
        )

    def _overflow_end(self, why: str, failure: ModelFailure) -> LoopEnd:
        """The error a user sees: the reason compaction could not help (when it says what to
        do, as the baseline text does, it is the message), else the overflow text with it."""
        key = self.h.req.session_key
        if "/reset" in why:
            message = in_this_engine(why, key)
        else:
            message = in_this_engine(CONTEXT_OVERFLOW_TEXT, key) + (f" ({why})" if why else "")
        # SPEC §5.6: the real figures, when the provider gave them (now, or in an earlier
        # overflow the session remembers).
        figures = provider_figures_text(
            failure.provider,
            failure.observed_tokens,
            failure.observed_limit or self.provider_window(),
        )
        if figures and figures not in message:
            message += f" ({figures}.)"
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(
                kind=ExecutionErrorKind.CONTEXT_OVERFLOW, message=message, failure=failure
            ),
        )

    # -- timeout -----------------------------------------------------------------------------

    def _timeout_decision(self, failure: ModelFailure) -> TimeoutCompactionDecision | None:
        window = self.h.req.context_window
        if window is None:
            return None
        # The run's last call, or (on a run's first call) the failed request as measured.
        prompt = max(self.h.c.usage.last_call.prompt_tokens, failure.prompt_tokens or 0)
        return decide_timeout_compaction(
            timed_out=True,
            timed_out_during_compaction=False,
            attempts_so_far=self.s.timeout_compactions if self.h.c.context else 0,
            prompt_tokens=prompt,
            context_window=window,
        )

    def timeout_compaction_due(self, failure: ModelFailure) -> bool:
        """A timed-out call whose prompt filled most of the window (pure: no state)."""
        decision = self._timeout_decision(failure)
        return decision is not None and decision.compact

    async def after_timeout(self, failure: ModelFailure) -> bool:
        """§4.6.4: True when the timed-out call should be made again after a compaction."""
        decision = self._timeout_decision(failure)
        if decision is None or decision.request is None:
            return False
        # Counted whether or not it then compacts (§18.5 T31).
        self.s.timeout_compactions += 1
        if self._count_step() is not None:
            return False
        result = await self._compact(
            CompactionTrigger.TIMEOUT_RECOVERY, failure, attempt=decision.request.attempt
        )
        return result.compacted

    # -- the activities ----------------------------------------------------------------------

    def _marker_id(self, kind: str, n: int) -> str:
        chain = chain_token_of(workflow.info().first_execution_run_id)
        return f"{self.h.req.run_id}:{chain}:{kind}{n}"

    async def _compact(
        self, trigger: CompactionTrigger, failure: ModelFailure, *, attempt: int
    ) -> CompactionResult:
        s, req = self.s, self.h.req
        s.compactions += 1
        n = s.compactions
        phase = self.h.phase
        self.h.phase = RunPhase.COMPACTING
        self.h.show(f"compacting the context ({trigger.value}, attempt {attempt})")
        try:
            result: CompactionResult = await workflow.execute_activity(
                COMPACT_CONTEXT,
                CompactionInput(
                    session_key=req.session_key,
                    run_id=req.run_id,
                    entry_id=self._marker_id("compaction", n),
                    model=self.model(),
                    profile_id=self.h.c.profile_id,
                    trigger=trigger.value,
                    attempt=attempt,
                    observed_tokens=failure.observed_tokens,
                    observed_limit=failure.observed_limit or self.provider_window(),
                    window_cap=self.h.window_cap(),
                    tools=req.tools,
                    idle_timeout_seconds=req.idle_timeout_seconds,
                    number=n,
                ),
                result_type=CompactionResult,
                task_queue=model_task_queue(workflow.info().task_queue),
                start_to_close_timeout=COMPACTION_START_TO_CLOSE,
                heartbeat_timeout=opts.HEARTBEAT_TIMEOUT,
                retry_policy=CONTEXT_STEP_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"compaction {n}: {trigger.value}, attempt {attempt}",
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise asyncio.CancelledError from err
            result = CompactionResult(
                outcome=CompactionOutcome.SUMMARY_FAILED,
                message=f"compaction failed: {err.cause or err}",
            )
        finally:
            self.h.phase = phase
        # The summariser's calls, priced by the activity: what the run spent, not its context.
        self.h.c.usage = self.h.c.usage.spend(result.usage)
        self.h.show(result.line())
        return result

    async def _truncate(self, failure: ModelFailure) -> bool:
        s, req = self.s, self.h.req
        s.truncations += 1
        n = s.truncations
        try:
            result: TruncationResult = await workflow.execute_activity(
                TRUNCATE_TOOL_RESULTS,
                TruncationInput(
                    session_key=req.session_key,
                    run_id=req.run_id,
                    entry_id=self._marker_id("truncation", n),
                    model=self.model(),
                    observed_limit=failure.observed_limit or self.provider_window(),
                ),
                result_type=TruncationResult,
                task_queue=model_task_queue(workflow.info().task_queue),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=CONTEXT_STEP_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=f"truncate tool results ({n})",
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise asyncio.CancelledError from err
            workflow.logger.warning("tool-result truncation failed: %s", err)
            return False
        if result.truncated:
            text = (
                f"cut {result.truncated} tool results to fit the context "
                f"({result.chars_removed} characters)"
            )
            self.h._emit(
                EventKind.WARNING,
                text=text,
                data={
                    "code": "tool_results_truncated",
                    "truncated": result.truncated,
                    "tokens_before": result.tokens_before,
                    "tokens_after": result.tokens_after,
                },
            )
            self.h.show(text)
        return result.truncated > 0
