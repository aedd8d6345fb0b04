"""What a run does about a failed model call, and how it picks its model and auth profile.

The Temporal half of failover (SPEC §4.3-§4.8, §7.5-§7.6, §8): read the shared profile state
through local activities, mark a failed profile in it race-free, wait on durable timers, tell
watchers. Every decision is a call into `workflows/policy/` over a snapshot that is in history,
so replay decides the same. Only the failed model call is made again: tools that already ran are
never re-run by a rotation, a lower thinking level, a retry or a model fallback (the original
re-runs whole attempts).

The order of a failure's handling, top to bottom in `after_failure`:
1. the iteration bound (§4.3 step 0, §4.7);
2. the shared state re-read, the failed profile marked (never for a timeout, §7.7);
3. the decision table of the failure's stage (§4.4.1 prompt, §4.4.2 assistant);
4. its action: lower thinking, rotate the profile, retry the same call once after an idle
   timeout, fall back to the next model (§8.2-8.3), or give up;
5. before giving up on a transient cause (rate limit, overload): wait until a profile or model is
   ready again, bounded (beyond the original).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentlane.announcements import PUBLISH_ANNOUNCEMENTS, PublishInput
    from agentlane.errors import ExecutionErrorKind, FailoverReason, ModelFailure
    from agentlane.events import Announcement, EventKind
    from agentlane.failover_state import FallbackAttemptRecord, FallbackState, RunFailover
    from agentlane.profile_listing import (
        LIST_PROFILES,
        UPDATE_PROFILE_USAGE,
        FailoverConfig,
        ListedProfiles,
        ListProfilesInput,
        UsageUpdate,
        UsageUpdateResult,
    )
    from agentlane.profile_state import ProfilePin, ProfileState, ProfileUsage
    from agentlane.run import (
        ExecutionError,
        ExecutionRequest,
        ModelRef,
        RunCarry,
        TerminationReason,
    )
    from agentlane.session import RunPhase
    from workflows import activity_options as opts
    from workflows.loop_end import LoopEnd
    from workflows.patches import (
        INCOMPLETE_RETRY_PATCH,
        MALFORMED_RETRY_PATCH,
        PRECISE_FAILURE_PATCH,
        STREAM_OVERLOAD_PATCH,
        STREAM_SERVER_ERROR_PATCH,
        TOLD_COOLDOWN_PATCH,
        TRANSIENT_CAP_PATCH,
        Patches,
    )
    from workflows.policy.auth_profiles import (
        advance,
        in_cooldown,
        mark_failure,
        mark_used,
        plan_profiles,
        select_initial,
        soonest_expiry,
        unavailable_reason,
    )
    from workflows.policy.context_guard import evaluate_context_window
    from workflows.policy.failover import (
        ESCALATION_TEXTS,
        Decision,
        DecisionKind,
        FailoverCounters,
        FailoverSettings,
        Stage,
        decide_assistant_failure,
        decide_prompt_failure,
        decide_retry_limit,
        run_loop_iteration_limit,
    )
    from workflows.policy.failure_facts import (
        failover_reason,
        failure_facts,
        failure_stage,
        profile_mark,
    )
    from workflows.policy.failure_kind import (
        failure_label,
        precise_kind,
        server_error_in_stream,
    )
    from workflows.policy.failure_text import (
        chain_exhausted_text,
        cooling_down_text,
        escalation_text,
        fallback_notice,
        idle_end_text,
        in_this_engine,
    )
    from workflows.policy.model_fallback import (
        CandidateError,
        FailureOutcome,
        FallbackAttempt,
        FallbackChain,
        ProbeThrottle,
        ProviderAvailability,
        effective_chain,
        fallback_summary,
        next_candidate,
        record_failure,
        should_retry_transient_http,
        start_chain,
    )
    from workflows.policy.model_fallback import ModelRef as ChainRef
    from workflows.policy.transient_retry import (
        CHAIN_RETRY_DELAY_SECONDS,
        CHAIN_RETRY_STATUSES,
        FALLBACK_AFTER_SECONDS,
        MAX_OVERLOAD_RETRIES,
        OVERLOAD,
        SERVER,
        TRANSPORT,
        chain_retry_text,
        count_limit_text,
        gave_up_text,
        moving_on_text,
        plan_transient_retry,
        retrying_text,
        seconds_text,
        transient_kind,
        transport_what,
    )
    from workflows.telemetry import RunTelemetry

R = FailoverReason
# Patch of runs recorded before this driver (they rotate profiles only; see legacy_failover).
FAILOVER_V2_PATCH = "failover-v2"
# Runs recorded before transient server errors were made again end on the first 500 (issue 24).
TRANSIENT_RETRY_PATCH = "transient-server-retry"
# Compare-and-set tries when other runs keep changing the same profile.
MAX_USAGE_UPDATE_TRIES = 5
# Waits for a cooling profile or model per run: their total is bounded by max_wait_seconds,
# and their number by this, so a provider that keeps answering 429 cannot hold a run for hours.
MAX_WAITS = 100
# Causes worth waiting out: they end by themselves.
TRANSIENT = frozenset({R.RATE_LIMIT, R.OVERLOADED})
# Providers without auth profiles or cooldowns.
KEYLESS_PROVIDERS = frozenset({"offline"})


class RunHost(Protocol):
    """What the driver needs of the run workflow."""

    req: ExecutionRequest
    c: RunCarry
    abort_reason: str | None
    phase: RunPhase
    waiting_until: float | None
    waiting_reason: str | None
    telemetry: RunTelemetry
    patches: Patches

    def _emit(self, kind: EventKind, turn_index: int | None = None, **fields: object) -> None: ...

    def show(self, text: str) -> None: ...

    def next_warning(self) -> int: ...


@dataclass(frozen=True)
class _Skip:
    """A candidate model that cannot be used now, and why (recorded in the chain)."""

    message: str
    reason: FailoverReason | None
    fatal: bool = False


class Waited:
    """The outcome of a wait: ready again, too long to wait, or aborted while waiting."""

    READY = "ready"
    TOO_LONG = "too_long"
    ABORTED = "aborted"


class Failover:
    def __init__(self, host: RunHost) -> None:
        self.h = host
        # Fresh snapshots of the shared profile state, per provider, of the current decision.
        self.listings: dict[str, ListedProfiles] = {}
        # When the last model call succeeded (workflow time): a failure recorded after it by
        # another session is newer news than this run's success (see `mark_used`).
        self.last_success_at: float | None = None
        self._transient_patched: bool | None = None

    # -- state ------------------------------------------------------------------------------

    @property
    def f(self) -> RunFailover:
        if self.h.c.failover is None:
            self.h.c.failover = RunFailover()
        return self.h.c.failover

    def model(self) -> ModelRef:
        return self.h.c.model or self.h.req.model

    def fallback_model(self) -> str | None:
        return self.h.c.model.label() if self.h.c.model is not None else None

    def _candidates(self) -> list[str | None]:
        return list(self.h.c.profile_candidates or []) or [None]

    def _settings(self) -> FailoverSettings:
        cooldowns = self.f.config.cooldowns
        chain = self.f.chain
        return FailoverSettings(
            fallback_configured=chain is not None and len(chain.candidates) > 1,
            rate_limit_rotation_cap=cooldowns.rate_limited_profile_rotations,
            overload_rotation_cap=cooldowns.overloaded_profile_rotations,
            overload_backoff_ms=cooldowns.overloaded_backoff_ms,
        )

    def _counters(self) -> FailoverCounters:
        c = self.h.c
        return FailoverCounters(
            iterations=c.failover_iterations,
            rate_limit_rotations=c.rate_limit_rotations,
            overload_rotations=c.overload_rotations,
            same_model_idle_retries=self.f.same_model_idle_retries,
            last_retry_reason=self.f.last_retry_reason,
            attempted_thinking=frozenset([*c.attempted_thinking, self._thinking()]),
        )

    def _take_counters(self, counters: FailoverCounters) -> None:
        c = self.h.c
        c.rate_limit_rotations = counters.rate_limit_rotations
        c.overload_rotations = counters.overload_rotations
        self.f.same_model_idle_retries = counters.same_model_idle_retries
        self.f.last_retry_reason = counters.last_retry_reason

    def _thinking(self) -> str:
        return self.h.c.thinking or self.h.req.thinking

    def allow_cooling(self) -> bool:
        """The call may go out on a profile the shared state shows cooling: it is the user's
        pin, or a probe (otherwise the model activity does not send it)."""
        failover = self.h.c.failover
        pid = self.h.c.profile_id
        return (
            failover is not None
            and pid is not None
            and pid in (failover.locked_profile, failover.probe_profile)
        )

    def note_success(self) -> None:
        self.last_success_at = workflow.time()
        failover = self.h.c.failover
        if failover is not None and (
            failover.transient_retries
            or failover.overload_retries
            or failover.attempts_before_chain
        ):
            failover.transient_retries, failover.transient_waited = 0, 0.0
            failover.overload_retries = 0
            failover.attempts_before_chain, failover.waited_before_chain = 0, 0.0

    # -- the shared profile state ------------------------------------------------------------

    async def _list(self, provider: str, *, with_config: bool = False) -> ListedProfiles:
        req = self.h.req
        listed: ListedProfiles = await workflow.execute_local_activity(
            LIST_PROFILES,
            ListProfilesInput(
                provider=provider,
                agent_id=req.agent_id if with_config else None,
                model=req.model.label() if with_config else None,
            ),
            result_type=ListedProfiles,
            start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
            summary=f"auth profiles of {provider}",
        )
        self.listings[provider] = listed
        return listed

    async def _update_shared(
        self,
        provider: str,
        profile_id: str,
        change: Callable[[ProfileState], ProfileState],
        summary: str,
        good_for: str | None = None,
    ) -> ProfileState:
        """Apply `change` (a pure policy function) to one profile in the shared store, race-free:
        the store takes the result only if nobody changed the profile since it was read;
        otherwise it is computed again from what the other run wrote."""
        listed = self.listings.get(provider) or await self._list(provider)
        state = listed.state
        for _ in range(MAX_USAGE_UPDATE_TRIES):
            expected = state.usage.get(profile_id)
            changed = change(state)
            new = changed.usage.get(profile_id)
            if new is None or (new == expected and good_for is None):
                break  # nothing to record (a timeout, a bypassed provider)
            outcome: UsageUpdateResult = await workflow.execute_local_activity(
                UPDATE_PROFILE_USAGE,
                UsageUpdate(profile_id=profile_id, expected=expected, new=new, good_for=good_for),
                result_type=UsageUpdateResult,
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                summary=summary,
            )
            if outcome.applied:
                state = changed
                break
            usage = dict(state.usage)
            if outcome.current is None:
                usage.pop(profile_id, None)
            else:
                usage[profile_id] = outcome.current
            state = state.model_copy(update={"usage": usage})
        self.listings[provider] = listed.model_copy(update={"state": state})
        return state

    def _availability(self, provider: str, model: str) -> ProviderAvailability | None:
        """SPEC §8.2's view of a provider for one model; None: no profiles to cool down."""
        listed = self.listings.get(provider)
        if listed is None or not listed.profiles:
            return None
        now = workflow.time()
        ids = [p.id for p in listed.profiles]
        state = listed.state
        free = [pid for pid in ids if not in_cooldown(state, pid, now, model, provider)]
        return ProviderAvailability(
            profile_count=len(ids),
            available_count=len(free),
            unavailable_reason=None if free else unavailable_reason(state, ids, now),
            soonest_cooldown_expiry=soonest_expiry(state, ids, now, model),
        )

    # -- the run's start ---------------------------------------------------------------------

    async def start(self) -> LoopEnd | None:
        """Before the first model call (SPEC §4.1, §7.6, §8.1): read the config's failover
        settings once, build the model chain, and choose the first model and profile that can
        be used now, waiting for a cooling one when every one is cooling for a transient
        reason. None: ready; a LoopEnd: the run cannot start."""
        req = self.h.req
        listed = await self._list(req.model.provider, with_config=True)
        config = listed.failover or FailoverConfig()
        self.h.c.failover = RunFailover(config=config)
        requested = req.model.label()
        known = effective_chain(requested, config.primary, config.fallbacks, config.models)
        chain = start_chain(known or [ChainRef(req.model.provider, req.model.model)])
        return await self._run_chain(chain, None)

    # -- after a failed model call -------------------------------------------------------------

    async def after_failure(self, failure: ModelFailure) -> LoopEnd | None:
        """Decide and do what follows a failed model call. None: make the call again (with
        whatever changed); a LoopEnd: the run ends so.

        A transient server error is first made again on the same profile after a backoff
        (issue 24, what the provider SDKs do by default); when the run's wait budget is spent,
        the table decides (a fallback model, or the end). A run about to end on a transient
        HTTP status gets the original's one retry of the whole chain (SPEC §8.4). A transport
        fault (refused, reset, a stream cut short) is made again the same way."""
        in_stream = failure.status is None and failure.reason == FailoverReason.OVERLOADED.value
        kind = transient_kind(
            failure.status,
            failure.reason,
            idle_timed_out=failure.idle_timed_out,
            transport=failure.transport_kind,
            overload_in_stream=in_stream and self.h.patches(STREAM_OVERLOAD_PATCH),
            # Asked only of such a failure: a run recorded before ended on it, and replays so.
            server_error_in_stream=server_error_in_stream(failure)
            and self.h.patches(STREAM_SERVER_ERROR_PATCH),
        )
        overload = kind == OVERLOAD
        if (
            kind is not None
            and not (overload and self.f.overload_retries >= MAX_OVERLOAD_RETRIES)
            and self._retries_transient()
        ):
            retried = await self._retry_transient(failure, overload=overload)
            if isinstance(retried, ModelFailure):
                failure = retried
                ended = await self._decide(failure)
            else:
                ended = retried
        else:
            ended = await self._decide(failure)
        if ended is not None and ended.reason is TerminationReason.ERROR:
            return await self._retry_chain_once(failure, ended)
        return ended

    def _retries_transient(self) -> bool:
        if self._transient_patched is None:
            self._transient_patched = self.h.patches(TRANSIENT_RETRY_PATCH)
        return self._transient_patched

    async def _retry_transient(
        self, failure: ModelFailure, *, overload: bool = False
    ) -> LoopEnd | ModelFailure | None:
        """The same call again after a backoff (or the server's Retry-After) while the wait
        budget lasts. None: make it again; a LoopEnd: aborted, or the budget is spent with
        no model to fall back to; a ModelFailure: for the table to decide, its message saying
        what the retries were."""
        f, status = self.f, failure.status or 0
        budget = float(self.h.req.max_wait_seconds)
        transport = failure.transport_kind
        plan = plan_transient_retry(
            retries_so_far=f.transient_retries,
            retry_after=failure.retry_after_seconds,
            waited_seconds=f.waited_seconds,
            budget_seconds=budget,
            draw=workflow.random().random(),
            kind=TRANSPORT if transport else SERVER,
            code=failure.code,
            few_for_malformed=self.h.patches(MALFORMED_RETRY_PATCH),
            few_for_incomplete=self.h.patches(INCOMPLETE_RETRY_PATCH),
        )
        what = (
            transport_what(
                transport,
                failure.host or "?",
                failure.provider,
                failure.code,
                failure.received_chars,
            )
            if transport
            # Said inside a 200 stream (an `overloaded_error` event): no status to name.
            else (
                f"an {'overload' if overload else 'error'} reported in the stream by "
                f"{failure.provider}"
                if not status
                else None
            )
        )
        capped = (
            plan is not None
            and not overload
            and self.h.patches(TRANSIENT_CAP_PATCH)
            and self._settings().fallback_configured
            and self._models_left()
            and f.transient_waited + plan.delay > FALLBACK_AFTER_SECONDS
        )
        if plan is None or capped or f.waits >= MAX_WAITS:
            if overload:
                return failure  # its cooldown and the table's rotation decide
            told = failure.retry_after_seconds
            # Counted on: the chain may be made again once (SPEC §8.4), and its end says all.
            f.attempts_before_chain += f.transient_retries + 1
            f.waited_before_chain += f.transient_waited
            text = gave_up_text(
                status=status,
                provider=failure.provider,
                model=self.model().label(),
                attempts=f.attempts_before_chain,
                waited_seconds=f.waited_before_chain,
                budget_seconds=budget,
                last_error=failure.message,
                retry_after=told if told is not None and told >= 0 else None,
                run_waited_seconds=f.waited_seconds,
                what=what,
                why=(
                    moving_on_text(FALLBACK_AFTER_SECONDS)
                    if capped
                    else count_limit_text(failure.code, f.transient_retries)
                    if transport
                    else None
                ),
            )
            f.transient_retries, f.transient_waited = 0, 0.0
            if self._settings().fallback_configured:
                return failure.model_copy(update={"message": text})
            return self._error(ExecutionErrorKind.TIMEOUT, text, failure)
        f.transient_retries += 1
        f.overload_retries += 1 if overload else 0
        f.transient_waited += plan.delay
        waited = await self._announced_wait(
            plan.delay,
            R.OVERLOADED if overload else R.TIMEOUT,
            retrying_text(status, failure.provider, plan, what),
            {
                "code": "transport_retry" if transport else "transient_retry",
                **(
                    {"transport": transport.value, "host": failure.host}
                    if transport
                    else {"status": status}
                ),
                "attempt": plan.attempt,
                "delay": plan.delay,
            },
            f"retry {failure.provider} after {what or f'HTTP {status}'}",
            label=failure_label(failure) if self.h.patches(PRECISE_FAILURE_PATCH) else None,
        )
        if waited is Waited.ABORTED:
            return LoopEnd(TerminationReason.ABORT_SIGNAL)
        return None

    async def _retry_chain_once(self, failure: ModelFailure, ended: LoopEnd) -> LoopEnd | None:
        """SPEC §8.4: the reply layer makes the whole chain again once, 2.5 s after a transient
        HTTP error ended it (not when the server asked for a longer wait)."""
        transient_http = failure.status in CHAIN_RETRY_STATUSES
        if not transient_http or not self._retries_transient():
            return ended
        f = self.f
        delay = CHAIN_RETRY_DELAY_SECONDS
        told = failure.retry_after_seconds
        if (
            not should_retry_transient_http(
                transient_http=transient_http, already_retried=f.chain_retried
            )
            or (told is not None and told > delay)
            or f.waited_seconds + delay > self.h.req.max_wait_seconds
            or f.waits >= MAX_WAITS
        ):
            return ended
        f.chain_retried = True
        chain = self._chain()
        first = chain.candidates[0].key if chain is not None else self.model().label()
        waited = await self._announced_wait(
            delay,
            R.TIMEOUT,
            chain_retry_text(failure.status or 0, failure.provider, first),
            {"code": "chain_retry", "status": failure.status},
            "retry the model chain once",
        )
        if waited is Waited.ABORTED:
            return LoopEnd(TerminationReason.ABORT_SIGNAL)
        f.waited_before_chain += delay
        f.transient_retries, f.transient_waited, f.overload_retries = 0, 0.0, 0
        self.listings = {}  # everything may have changed while waiting
        if chain is None:
            return None
        return await self._run_chain(start_chain(chain.candidates, throttle=chain.throttle), None)

    async def _decide(self, failure: ModelFailure) -> LoopEnd | None:
        """The decision table and its action (SPEC §4.4), then waiting or the end."""
        c = self.h.c
        model = self.model()
        facts = failure_facts(failure)
        stage = failure_stage(failure)
        settings = self._settings()
        candidates = self._candidates()
        limit = run_loop_iteration_limit(len(candidates))
        nxt: int | None = None
        exhausted = decide_retry_limit(self._counters(), settings, limit=limit)
        if exhausted is not None:
            decision = exhausted
        else:
            nxt = await self._mark_and_find_next(failure)
            decide = decide_assistant_failure if stage is Stage.ASSISTANT else decide_prompt_failure
            decision = decide(facts, self._counters(), settings, more_profiles=nxt is not None)
            self._take_counters(decision.counters)
        c.failover_iterations += 1
        kind = decision.kind
        if kind is DecisionKind.LOWER_THINKING and decision.thinking is not None:
            self._lower_thinking(decision.thinking)
            return None
        if kind is DecisionKind.ROTATE_PROFILE and nxt is not None:
            return await self._rotate(nxt, failure, decision)
        if kind is DecisionKind.RETRY_SAME:
            self._retry_same(failure)
            return None
        if kind is DecisionKind.FALLBACK_MODEL:
            return await self._fall_back(decision, failure)
        return await self._wait_or_end(decision, failure, model)

    async def _mark_and_find_next(self, failure: ModelFailure) -> int | None:
        """Re-read the shared state (other sessions may have cooled profiles down meanwhile),
        mark the failed profile in it (never for a timeout), and find the next candidate not
        cooling down for this model (SPEC §4.4.1 step 5, §7.6 advance)."""
        candidates = self._candidates()
        if candidates == [None]:
            return None
        model = self.model()
        await self._list(model.provider)
        failed = failure.profile_id or self.h.c.profile_id
        reason = profile_mark(failure)
        if failed and reason is not None:
            self.h.telemetry.cooled(model.provider, reason.value)
            cooldowns = self.f.config.cooldowns
            told_lengthens = self.h.patches(TOLD_COOLDOWN_PATCH)
            await self._update_shared(
                model.provider,
                failed,
                lambda state: mark_failure(
                    state,
                    failed,
                    reason,
                    provider=model.provider,
                    now=workflow.time(),
                    model_id=model.model,
                    cooldowns=cooldowns,
                    retry_after=failure.retry_after_seconds,
                    told_lengthens=told_lengthens,
                ),
                f"mark {failed}: {reason.value}",
            )
        state = self.listings[model.provider].state
        current = candidates.index(failed) if failed in candidates else 0
        return advance(
            candidates,
            current,
            state,
            model.model,
            workflow.time(),
            locked=self.f.locked_profile,
        )

    def _lower_thinking(self, level: str) -> None:
        """SPEC §6: the provider refused the thinking level; the same call at the next level."""
        c = self.h.c
        refused = self._thinking()
        c.attempted_thinking = [*c.attempted_thinking, refused]
        c.thinking = level
        # Said once per lowering: the user asked for `refused` and gets `level` for this run.
        text = f"{self.model().label()} does not take thinking level {refused}; using {level}"
        self.h._emit(
            EventKind.WARNING,
            text=text,
            data={"code": "thinking_lowered", "from": refused, "to": level},
        )
        self.h.show(f"thinking lowered to {level}")

    async def _rotate(
        self, index: int, failure: ModelFailure, decision: Decision
    ) -> LoopEnd | None:
        c = self.h.c
        chosen = self._candidates()[index]
        failed = failure.profile_id or c.profile_id
        told = failure.retry_after_seconds
        if failure.reason == R.OVERLOADED.value and told and self._retries_transient():
            # An overload is the server's, not the profile's: the next profile would meet it
            # too. Its Retry-After is waited out first when the budget allows (issue 24).
            seconds = max(told, decision.backoff_ms / 1000)
            if self.f.waited_seconds + seconds <= self.h.req.max_wait_seconds:
                waited = await self._announced_wait(
                    seconds,
                    R.OVERLOADED,
                    f"HTTP {failure.status or 503} from {failure.provider} (overloaded); waiting "
                    f"{seconds_text(seconds)} as the server asked (Retry-After), then trying "
                    f"{chosen}",
                    {"code": "overload_wait", "status": failure.status},
                    f"overload of {failure.provider} ({seconds_text(seconds)})",
                )
                if waited is Waited.ABORTED:
                    return LoopEnd(TerminationReason.ABORT_SIGNAL)
        elif decision.backoff_ms:
            await workflow.sleep(
                timedelta(milliseconds=decision.backoff_ms), summary="overload backoff"
            )
        c.profile_id = chosen
        self.h.telemetry.rotated(failure.provider, failure.reason)
        # SPEC §6: a new profile starts its thinking afresh.
        c.thinking, c.attempted_thinking = None, []
        why = "timed out" if failure.idle_timed_out or failure.reason == "timeout" else None
        text = (
            f"{failure.provider} profile {failed} {why or f'failed ({failure.reason})'}; "
            f"trying {chosen}"
        )
        self.h._emit(
            EventKind.WARNING,
            text=text,
            data={
                "code": "profile_rotated",
                "from": failed,
                "to": chosen,
                "reason": failure.reason,
            },
        )
        self.h.show(text)
        return None

    def _retry_same(self, failure: ModelFailure) -> None:
        """SPEC §4.4.2: one more try of the same model after the idle watchdog fired with
        nothing shown and no fallback to go to."""
        text = (
            f"{self.model().label()} was silent for {self.h.req.idle_timeout_seconds} s; "
            "trying the same call once more"
        )
        self.h._emit(
            EventKind.WARNING, text=text, data={"code": "idle_retry", "reason": failure.reason}
        )
        self.h.show(text)

    # -- model fallback (SPEC §8) ------------------------------------------------------------

    def _models_left(self) -> bool:
        """Whether the chain has a model after this one to try (the last keeps the whole wait
        budget)."""
        chain = self._chain()
        return chain is not None and chain.position < len(chain.candidates)

    def _chain(self) -> FallbackChain | None:
        saved = self.f.chain
        if saved is None:
            return None
        refs = [ChainRef.parse(key) for key in saved.candidates]
        candidates = tuple(r for r in refs if r is not None)
        return FallbackChain(
            candidates=candidates,
            requested=candidates[0],
            position=saved.position,
            attempts=tuple(
                FallbackAttempt(a.provider, a.model, a.error, a.reason, a.status)
                for a in saved.attempts
            ),
            probed_providers=frozenset(saved.probed_providers),
            throttle=ProbeThrottle(dict(saved.throttle)),
            running_probe=saved.running_probe,
        )

    def _save_chain(self, chain: FallbackChain) -> None:
        self.f.chain = FallbackState(
            candidates=[r.key for r in chain.candidates],
            position=chain.position,
            attempts=[
                FallbackAttemptRecord(
                    provider=a.provider,
                    model=a.model,
                    error=a.error,
                    reason=a.reason,
                    status=a.status,
                )
                for a in chain.attempts
            ],
            probed_providers=sorted(chain.probed_providers),
            throttle=dict(chain.throttle.last_probe),
            running_probe=chain.running_probe,
        )

    async def _fall_back(self, decision: Decision, failure: ModelFailure) -> LoopEnd | None:
        chain = self._chain()
        model = self.model()
        if chain is None:
            return self._end(decision, failure)
        error = CandidateError(
            message=decision.message or failure.message,
            reason=decision.reason,
            # A transport fault had no HTTP answer, an error said in a stream no status of its
            # own: none is said (not the table's 408).
            status=failure.status
            if failure.transport_kind or server_error_in_stream(failure)
            else decision.status or failure.status,
            context_overflow=failure.reason == "context_overflow",
        )
        chain, outcome = record_failure(chain, ChainRef(model.provider, model.model), error)
        self._save_chain(chain)
        if outcome is FailureOutcome.RETHROW:
            return self._end(decision, failure)
        return await self._run_chain(chain, failure)

    async def _prefetch(self, chain: FallbackChain) -> None:
        """Snapshots of every provider still ahead in the chain (those already read for this
        decision are fresh enough)."""
        for ref in chain.candidates[chain.position :]:
            if ref.provider not in KEYLESS_PROVIDERS and ref.provider not in self.listings:
                await self._list(ref.provider)

    async def _run_chain(
        self, chain: FallbackChain, failure: ModelFailure | None
    ) -> LoopEnd | None:
        """Walk the chain from its position to the first candidate usable now (SPEC §8.2):
        None when the run has one (its model and profile set), else the run's end. When every
        candidate is out for a transient reason, wait for the soonest and walk it again."""
        while True:
            await self._prefetch(chain)
            step = next_candidate(chain, self._availability, workflow.time())
            chain = step.chain
            candidate = step.candidate
            if candidate is None:
                waited = await self._wait_for_chain(chain, failure)
                if waited is Waited.READY:
                    chain = start_chain(chain.candidates, throttle=chain.throttle)
                    self.listings = {}  # everything may have changed while waiting
                    continue
                self._save_chain(chain)
                if waited is Waited.ABORTED:
                    return LoopEnd(TerminationReason.ABORT_SIGNAL)
                return self._chain_end(chain, failure)
            skip = self._activate(candidate, step.allow_transient_cooldown_probe, chain)
            if skip is None:
                self._save_chain(chain)
                return None
            if skip.fatal:
                self._save_chain(chain)
                return self._error(ExecutionErrorKind.VALIDATION_FAILED, skip.message)
            chain, _ = record_failure(
                chain, candidate, CandidateError(message=skip.message, reason=skip.reason)
            )

    def _activate(
        self, candidate: ChainRef, allow_probe: bool, chain: FallbackChain | None = None
    ) -> _Skip | None:
        """Make `candidate` the run's model with its first usable profile (SPEC §7.6), or say
        why it cannot be used."""
        req, c = self.h.req, self.h.c
        ref = ModelRef(provider=candidate.provider, model=candidate.model)
        requested = ref == req.model
        option = self.f.config.models.get(candidate.key)
        if not requested and option is not None and option.context_window is not None:
            guard = evaluate_context_window(
                option.context_window,
                provider=candidate.provider,
                model=candidate.model,
                source=option.window_source,
            )
            if guard.block_message is not None:
                return _Skip(guard.block_message, R.UNKNOWN)
        now = workflow.time()
        listed = self.listings.get(candidate.provider)
        locked: str | None = None
        candidates: list[str | None] = [None]
        state = ProfileState()
        if listed is not None and listed.profiles:
            session_provider = candidate.provider == req.model.provider
            plan = plan_profiles(
                listed.state,
                candidate.provider,
                listed.profiles,
                now,
                pin=req.profile_pin if session_provider else None,
                configured_profiles=listed.configured,
                configured_order=listed.configured_order,
                spread_seed=zlib.crc32(req.session_key.encode()),
            )
            if plan.error is not None:
                return _Skip(plan.error, R.AUTH, fatal=requested)
            candidates, locked, state = plan.candidates, plan.locked, listed.state
        chosen = select_initial(
            candidates,
            state,
            candidate.model,
            now,
            locked=locked,
            allow_transient_probe=allow_probe,
        )
        if chosen.index is None:
            reason = chosen.reason or R.UNKNOWN
            return _Skip(
                f"Provider {candidate.provider} is in cooldown (all profiles unavailable)", reason
            )
        previous = self.model()
        c.model = None if requested else ref
        c.profile_candidates = [pid for pid in candidates if pid] or None
        c.profile_id = candidates[chosen.index]
        self.f.locked_profile = locked
        self.f.probe_profile = c.profile_id if chosen.probe else None
        if ref != previous:
            # A new model starts its loop afresh (the original runs a new attempt loop per
            # candidate); the thinking level goes back to the session's.
            c.failover_iterations = c.rate_limit_rotations = c.overload_rotations = 0
            c.thinking, c.attempted_thinking = None, []
            self.f.same_model_idle_retries = 0
            self.f.transient_retries, self.f.transient_waited = 0, 0.0
            self.f.overload_retries = 0
            self.f.attempts_before_chain, self.f.waited_before_chain = 0, 0.0
            # Why the previous model is left: its last failure in the chain.
            last = next(
                (
                    a
                    for a in reversed(chain.attempts if chain is not None else ())
                    if f"{a.provider}/{a.model}" == previous.label()
                ),
                None,
            )
            text = fallback_notice(
                previous.label(),
                ref.label(),
                status=last.status if last else None,
                reason=last.reason if last else None,
                error=last.error if last else "",
            )
            data: dict[str, object] = {
                "code": "model_fallback",
                "from": previous.label(),
                "to": ref.label(),
            }
            if last is not None:
                data.update(status=last.status, reason=last.reason)
            self.h._emit(EventKind.WARNING, text=text, data=data)
            self.h.show(text)
        elif chosen.probe:
            self.h.show(f"probing {c.profile_id} of {ref.label()} while it cools down")
        return None

    def _chain_end(self, chain: FallbackChain, failure: ModelFailure | None) -> LoopEnd:
        """Every candidate failed or is out (SPEC §8.3): the summary when more than one was
        tried, else what the one said."""
        now = workflow.time()
        soonest = self._soonest(chain.candidates)
        summary = fallback_summary(chain, soonest)
        reason = chain.attempts[-1].reason if chain.attempts else None
        if summary is not None:
            kind = _error_kind(reason if all(a.reason == reason for a in chain.attempts) else None)
            return self._error(kind, chain_exhausted_text(summary, now=now), failure)
        if failure is not None and not self._all_cooling(self.model()):
            # One candidate, and it answered: its own words (SPEC §8.3 "rethrow").
            decision = Decision(DecisionKind.FAIL, self._counters(), reason=reason)
            return self._end(decision, failure)
        model = chain.candidates[0]
        profiles = list(self.h.c.profile_candidates or [])
        listed = self.listings.get(model.provider)
        if listed is not None and listed.profiles:
            profiles = [p.id for p in listed.profiles]
        text = cooling_down_text(
            model=model.key,
            reason=reason,
            profiles=profiles,
            soonest=soonest,
            now=now,
            status=failure.status if failure else None,
            **(self._told(failure) if failure else {}),
        )
        return self._error(_error_kind(reason), text, failure)

    # -- waiting instead of failing (beyond the original) --------------------------------------

    def _soonest(self, refs: Sequence[ChainRef]) -> float | None:
        now = workflow.time()
        ends: list[float] = []
        for ref in refs:
            listed = self.listings.get(ref.provider)
            if listed is None or not listed.profiles:
                continue
            ids = [p.id for p in listed.profiles]
            end = soonest_expiry(listed.state, ids, now, ref.model)
            if end is not None:
                ends.append(end)
        return min(ends) if ends else None

    async def _wait_for_chain(self, chain: FallbackChain, failure: ModelFailure | None) -> str:
        """Every candidate is out: wait when all are out for a transient reason."""
        reasons = {a.reason for a in chain.attempts}
        if not reasons or not reasons <= TRANSIENT:
            return Waited.TOO_LONG
        reason = R.RATE_LIMIT if R.RATE_LIMIT in reasons else R.OVERLOADED
        retry_after = failure.retry_after_seconds if failure else None
        soonest = self._soonest(chain.candidates)
        return await self._wait(soonest, retry_after, reason, "every model")

    async def _wait_or_end(
        self, decision: Decision, failure: ModelFailure, model: ModelRef
    ) -> LoopEnd | None:
        """No rotation, no fallback. For a transient cause (or a timeout with other profiles to
        rotate to once they cool down), wait for a profile of this model or the provider's
        Retry-After, then make the same call again; else end. Others may cool a profile again
        while this run waits: it waits again, within the same budget."""
        reason = decision.reason or failover_reason(failure)
        timed_out = failure.idle_timed_out or reason is R.TIMEOUT
        others = [pid for pid in self._candidates() if pid and pid != self.h.c.profile_id]
        if decision.error_kind == "retry_limit" or not (
            (reason in TRANSIENT and not timed_out) or (timed_out and others)
        ):
            return self._end(decision, failure)
        retry_after = None if timed_out else failure.retry_after_seconds
        wait_for = R.TIMEOUT if timed_out else reason or R.RATE_LIMIT
        listed = self.listings.get(model.provider)
        if listed is None or not listed.profiles:
            # No profiles to wait for: only the provider's Retry-After.
            if not retry_after:
                return self._end(decision, failure)
            waited = await self._wait(None, retry_after, wait_for, "the provider")
            return self._after_wait(waited, decision, failure)
        rested = False  # a wait has ended: the profile that failed may be used again
        while True:
            pool = self._candidates()
            if timed_out:
                # Away from the profile that went silent (a timeout rotates, SPEC §4.6.5).
                pool = [pid for pid in pool if pid in others]
            chosen = select_initial(
                pool, listed.state, model.model, workflow.time(), locked=self.f.locked_profile
            )
            if chosen.index is not None and (rested or pool[chosen.index] != self.h.c.profile_id):
                # One is usable now (an earlier candidate whose window ended, or one that
                # cooled down while this run waited).
                self.h.c.profile_id = pool[chosen.index]
                self.h.c.thinking, self.h.c.attempted_thinking = None, []
                self.h.c.rate_limit_rotations = self.h.c.overload_rotations = 0
                return None
            ids = [pid for pid in pool if pid]
            soonest = soonest_expiry(listed.state, ids, workflow.time(), model.model)
            if soonest is None and not retry_after:
                return self._end(decision, failure)
            waited = await self._wait(soonest, retry_after, wait_for, "a profile")
            ended = self._after_wait(waited, decision, failure)
            if ended is not None:
                return ended
            listed = await self._list(model.provider)
            rested = True

    def _after_wait(self, waited: str, decision: Decision, failure: ModelFailure) -> LoopEnd | None:
        if waited is Waited.ABORTED:
            return LoopEnd(TerminationReason.ABORT_SIGNAL)
        if waited is Waited.TOO_LONG:
            return self._end(decision, failure)
        return None

    async def _wait(
        self, soonest: float | None, retry_after: float | None, reason: FailoverReason, what: str
    ) -> str:
        """A durable, labelled timer until `soonest` or the Retry-After, whichever is later; all
        of a run's waits together are bounded by `max_wait_seconds` (a 36-hour Retry-After is
        never slept). An abort ends it at once. Status says `waiting` with reason and
        until-when, and watchers are told."""
        now = workflow.time()
        if soonest is None and not retry_after:
            return Waited.TOO_LONG
        # At least a second: a window that ends now may still be in the snapshot.
        until = max(soonest or now, now + (retry_after or 0.0), now + 1.0)
        budget = self.h.req.max_wait_seconds - self.f.waited_seconds
        if until - now > budget or self.f.waits >= MAX_WAITS:
            return Waited.TOO_LONG
        seconds = max(1, math.ceil(until - now))
        label = self.model().label()
        text = f"{what} of {label} is cooling down ({reason.value}); waiting {seconds} s"
        model = self.model()
        return await self._announced_wait(
            until - now,
            reason,
            text,
            {"code": "waiting_for_profile"},
            f"wait for {model.provider} ({reason.value}, {seconds} s)",
        )

    async def _announced_wait(
        self,
        seconds: float,
        reason: FailoverReason,
        text: str,
        data: dict[str, object],
        timer_summary: str,
        label: str | None = None,
    ) -> str:
        """A durable timer of `seconds`, counted against the run's wait budget, announced once
        as a warning, shown in status as `waiting` (why: `label`, else `reason`), ended at
        once by an abort."""
        now = workflow.time()
        until = now + seconds
        self.f.waits += 1
        self.f.waited_seconds += seconds
        h = self.h
        h.phase, h.waiting_until = RunPhase.WAITING, until
        h.waiting_reason = label or reason.value
        h.show(text)
        code = data.get("code")
        extra = {k: v for k, v in data.items() if k != "code"}
        await workflow.execute_local_activity(
            PUBLISH_ANNOUNCEMENTS,
            PublishInput(
                session_key=h.req.session_key,
                run_id=h.req.run_id,
                announce=[
                    Announcement(
                        kind=EventKind.WARNING,
                        ts=now,
                        text=text,
                        data={
                            "code": code,
                            "until": until,
                            "reason": reason,
                            "n": h.next_warning(),
                            **extra,
                        },
                    )
                ],
            ),
            start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
            summary="announce the wait",
        )
        model = self.model()
        try:
            with h.telemetry.waiting(model.provider, model.model, reason.value, seconds):
                await workflow.wait_condition(
                    lambda: h.abort_reason is not None,
                    timeout=seconds,
                    timeout_summary=timer_summary,
                )
        except TimeoutError:
            pass
        finally:
            h.phase, h.waiting_until, h.waiting_reason = RunPhase.STREAMING, None, None
        return Waited.ABORTED if h.abort_reason is not None else Waited.READY

    # -- the end -----------------------------------------------------------------------------

    def _end(self, decision: Decision, failure: ModelFailure) -> LoopEnd:
        """The run ends with this decision's words, made specific (SPEC §4.6.5, §4.7, §8.4)."""
        model = self.model()
        if failure.idle_timed_out and decision.kind is not DecisionKind.FALLBACK_MODEL:
            return LoopEnd(
                TerminationReason.IDLE_TIMEOUT_120S,
                ExecutionError(
                    kind=ExecutionErrorKind.TIMEOUT,
                    message=idle_end_text(
                        model.label(), self.h.req.idle_timeout_seconds, failure.produced_output
                    ),
                    detail=failure.raw_message,
                    failure=failure,
                ),
            )
        if decision.error_kind == "retry_limit":
            # The original's text sends users to /new, which this engine does not need: the
            # session is fine, the provider kept failing.
            text = (
                f"Request failed after repeated internal retries ({decision.counters.iterations} "
                f"attempts on {model.label()}; last error: {failure.message}). Please try again."
            )
            return self._error(ExecutionErrorKind.RUNTIME_ERROR, text, failure)
        reason = decision.reason or failover_reason(failure)
        listed = self.listings.get(model.provider)
        if reason in TRANSIENT and listed is not None and self._all_cooling(model):
            ids = [p.id for p in listed.profiles]
            now = workflow.time()
            text = cooling_down_text(
                model=model.label(),
                reason=reason,
                profiles=ids,
                soonest=soonest_expiry(listed.state, ids, now, model.model),
                now=now,
                status=failure.status,
                **self._told(failure),
            )
            return self._error(_error_kind(reason), text, failure)
        message = decision.message if decision.error_kind else failure.message
        if message in ESCALATION_TEXTS:
            # The original's words name nothing: which model, what it said, how long the run
            # waited for it.
            message = escalation_text(
                message,
                model.label(),
                f"HTTP {failure.status} from {failure.provider}"
                if failure.status
                else failure.provider,
                failure.raw_message or failure.message,
                waited=self.f.waited_seconds,
                wait_bound=float(self.h.req.max_wait_seconds),
            )
        return self._error(_error_kind(reason), message or failure.message, failure)

    def _told(self, failure: ModelFailure) -> dict[str, float | None]:
        """The provider's Retry-After and the run's wait budget, for an ending's text."""
        return {
            "retry_after": failure.retry_after_seconds,
            "wait_bound": float(self.h.req.max_wait_seconds),
            "waited": self.f.waited_seconds,
        }

    def _all_cooling(self, model: ModelRef) -> bool:
        listed = self.listings.get(model.provider)
        if listed is None or not listed.profiles:
            return False
        now = workflow.time()
        return all(in_cooldown(listed.state, p.id, now, model.model) for p in listed.profiles)

    def _error(
        self, kind: ExecutionErrorKind, message: str, failure: ModelFailure | None = None
    ) -> LoopEnd:
        # Not a slow model: the provider could not be reached (issue 24, 25), or answered with
        # an error of its own.
        kind = precise_kind(kind, failure)
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(
                kind=kind,
                message=in_this_engine(message, self.h.req.session_key),
                failure=failure,
            ),
        )

    # -- on success ---------------------------------------------------------------------------

    async def succeeded(self) -> None:
        """SPEC §4.8 / §7.7: the profile that answered is marked used (its error state
        cleared, unless another session recorded a failure after this run's last success) and
        good for its provider. One write per run, never one per model call."""
        model = self.model()
        pid = self.h.c.profile_id
        if pid is None or model.provider in KEYLESS_PROVIDERS:
            return
        now = workflow.time()
        at = self.last_success_at or now
        listed = self.listings.get(model.provider)
        seen = listed.state.usage.get(pid) if listed is not None else None
        if listed is not None and (seen is None or seen.unusable_until() is None):
            # Nothing to clear as far as this run knows: only the use is recorded, merged by
            # the store (a newer failure of another session stays as it is).
            await workflow.execute_local_activity(
                UPDATE_PROFILE_USAGE,
                UsageUpdate(
                    profile_id=pid,
                    new=ProfileUsage(last_used=now),
                    good_for=model.provider,
                    touch=True,
                ),
                result_type=UsageUpdateResult,
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                summary=f"mark {pid} used",
            )
            return
        await self._update_shared(
            model.provider,
            pid,
            lambda state: mark_used(state, pid, now, succeeded_at=at),
            f"mark {pid} used",
            good_for=model.provider,
        )

    def result_pin(self) -> ProfilePin | None:
        """The pin the session keeps: the user's, or the profile this run ended on (SPEC §7.4);
        none when the run ended on another provider's model."""
        c, req = self.h.c, self.h.req
        if req.profile_pin is not None and req.profile_pin.source == "user":
            return req.profile_pin
        if c.profile_id is None or self.model().provider != req.model.provider:
            return req.profile_pin
        return ProfilePin(profile_id=c.profile_id, source="auto")


def _error_kind(reason: FailoverReason | None) -> ExecutionErrorKind:
    return {
        R.RATE_LIMIT: ExecutionErrorKind.QUOTA_EXCEEDED,
        R.OVERLOADED: ExecutionErrorKind.RUNTIME_UNAVAILABLE,
        R.BILLING: ExecutionErrorKind.BILLING,
        R.TIMEOUT: ExecutionErrorKind.TIMEOUT,
        R.AUTH: ExecutionErrorKind.AUTH,
        R.AUTH_PERMANENT: ExecutionErrorKind.AUTH,
        R.MODEL_NOT_FOUND: ExecutionErrorKind.RUNTIME_UNAVAILABLE,
    }.get(reason or R.UNKNOWN, ExecutionErrorKind.RUNTIME_ERROR)


__all__ = ["FAILOVER_V2_PATCH", "Failover", "RunHost"]
