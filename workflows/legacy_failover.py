"""Profile rotation as runs recorded before `failover-v2` did it (replay only).

Histories recorded with the first rotation code (a provider failure rotates to the next profile
or waits for one; no model fallback, no idle-timeout handling) must replay to the same commands,
so that code stays here unchanged and `AgentRunWorkflow` uses it when `workflow.patched(
"failover-v2")` says the history predates the driver in `workflows/run_failover.py`. New runs
never come here. Delete it once no workflow recorded before that patch can still be running
(runs last at most 48 h) and the replay suite's older histories are retired.
"""

from __future__ import annotations

import asyncio
import builtins
import math
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentlane.announcements import PUBLISH_ANNOUNCEMENTS, PublishInput
    from agentlane.errors import (
        MODEL_PROVIDER_ERROR,
        ExecutionErrorKind,
        FailoverReason,
        ModelFailure,
    )
    from agentlane.events import Announcement, EventKind
    from agentlane.profile_listing import (
        LIST_PROFILES,
        UPDATE_PROFILE_USAGE,
        ListedProfiles,
        ListProfilesInput,
        UsageUpdate,
        UsageUpdateResult,
    )
    from agentlane.profile_state import ProfileState
    from agentlane.run import ExecutionError, ExecutionRequest, RunCarry, TerminationReason
    from agentlane.session import RunPhase
    from workflows import activity_options as opts
    from workflows.loop_end import LoopEnd
    from workflows.policy.auth_profiles import (
        advance,
        candidate_list,
        mark_failure,
        select_initial,
        soonest_expiry,
    )
    from workflows.policy.failover import (
        DecisionKind,
        FailoverCounters,
        FailoverSettings,
        FailureFacts,
        decide_prompt_failure,
        run_loop_iteration_limit,
    )
    from workflows.policy.failure_facts import NON_FAILOVER_KINDS
    from workflows.policy.model_fallback import rate_limit_cooldown_reply
    from workflows.policy.thinking_fallback import pick_fallback_thinking_level

# How many times a run start waits for a cooling profile before it gives up.
MAX_PROFILE_WAITS = 3
# Compare-and-set tries when other runs keep changing the same profile.
MAX_USAGE_UPDATE_TRIES = 5
# Runs recorded before profile rotation ended at the first provider failure.
PROFILE_ROTATION_PATCH = "auth-profile-rotation"
# Runs recorded before the thinking fallback ended at a thinking refusal.
THINKING_FALLBACK_PATCH = "thinking-fallback"


def _provider_failure(err: ActivityError) -> ModelFailure | None:
    """The classified provider failure an activity reported, if that is what failed it."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == MODEL_PROVIDER_ERROR and cause.details:
        return ModelFailure.model_validate(cause.details[0])
    return None


class LegacyFailover:
    """Mixed into AgentRunWorkflow; the attributes below are the run's own."""

    req: ExecutionRequest
    c: RunCarry
    abort_reason: str | None
    phase: RunPhase
    waiting_until: float | None
    waiting_reason: str | None

    def _emit(self, kind: EventKind, turn_index: int | None = None, **fields: object) -> None:
        raise NotImplementedError

    def _thinking(self) -> str:
        raise NotImplementedError

    async def _rotate_profile(self, err: ActivityError) -> bool:
        """SPEC §4.4.1 and §7.6: after a provider failure, mark the profile that failed (never for
        a timeout) and retry the same turn with the next profile not cooling down, within the
        rotation caps and the iteration bound. Only the failed model call is retried: tools that
        already ran are never run again. False: the failure ends the run."""
        failure = _provider_failure(err)
        if failure is None or not workflow.patched(PROFILE_ROTATION_PATCH):
            return False
        try:
            reason: FailoverReason | None = FailoverReason(failure.reason)
        except ValueError:
            reason = None
        facts = FailureFacts(
            reason=reason,
            message=failure.message,
            raw_message=failure.raw_message,
            status=failure.status,
            kind=failure.reason if failure.reason in NON_FAILOVER_KINDS else None,
            failover_failure=reason is not None,
            timed_out=reason is FailoverReason.TIMEOUT,
        )
        # The shared state as it is now: other sessions may have cooled profiles down meanwhile.
        state = await self._list_profiles()
        candidates = candidate_list(self.c.profile_candidates or [])
        failed = failure.profile_id or self.c.profile_id
        current = candidates.index(failed) if failed in candidates else 0
        now = workflow.time()
        if failed and reason is not None:
            state = await self._mark_shared(state, failed, reason, now)
        nxt = advance(candidates, current, state, self.req.model.model, now)
        decision = decide_prompt_failure(
            facts,
            FailoverCounters(
                iterations=self.c.failover_iterations,
                rate_limit_rotations=self.c.rate_limit_rotations,
                overload_rotations=self.c.overload_rotations,
                attempted_thinking=frozenset(self.c.attempted_thinking),
            ),
            FailoverSettings(),
            more_profiles=nxt is not None,
        )
        self.c.rate_limit_rotations = decision.counters.rate_limit_rotations
        self.c.overload_rotations = decision.counters.overload_rotations
        if decision.kind is not DecisionKind.ROTATE_PROFILE or nxt is None:
            return await self._wait_then_retry(state, candidates, reason, failure)
        self.c.failover_iterations += 1
        if self.c.failover_iterations > run_loop_iteration_limit(len(candidates)):
            return False
        if decision.backoff_ms:
            await workflow.sleep(timedelta(milliseconds=decision.backoff_ms), summary="backoff")
        chosen = candidates[nxt]
        self.c.profile_id = chosen
        self.c.attempted_thinking = []  # SPEC §6: a new profile starts its thinking afresh
        text = f"{failure.provider} profile {failed} failed ({failure.reason}); trying {chosen}"
        self._emit(
            EventKind.WARNING,
            text=text,
            data={
                "code": "profile_rotated",
                "from": failed,
                "to": chosen,
                "reason": failure.reason,
            },
        )
        workflow.set_current_details(
            f"run **{self.req.run_id}** on {self.req.model.label()}; {text}"
        )
        return True

    async def _wait_then_retry(
        self,
        state: ProfileState,
        candidates: list[str | None],
        reason: FailoverReason | None,
        failure: ModelFailure,
    ) -> bool:
        """No other profile to rotate to: wait for the soonest to cool down (transient reasons
        only, bounded) and make the same call again with it."""
        if len(candidates) == 1 and candidates[0] is None:
            return False  # no stored profiles: nothing to track a cooldown on
        self.c.failover_iterations += 1
        if self.c.failover_iterations > run_loop_iteration_limit(len(candidates)):
            return False
        waited = await self._wait_for_profile(state, reason, failure.retry_after_seconds)
        if waited is None:
            raise asyncio.CancelledError  # aborted while waiting: end like any abort
        if not waited:
            return False
        state = await self._list_profiles()
        candidates = candidate_list(self.c.profile_candidates or [])
        chosen = select_initial(candidates, state, self.req.model.model, workflow.time())
        if chosen.index is None:
            return False
        self.c.profile_id = candidates[chosen.index]
        return True

    async def _list_profiles(self) -> ProfileState:
        """The provider's profiles (the run's candidates, in order) and the shared state."""
        listed: ListedProfiles = await workflow.execute_local_activity(
            LIST_PROFILES,
            ListProfilesInput(provider=self.req.model.provider),
            result_type=ListedProfiles,
            start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
            summary=f"auth profiles of {self.req.model.provider}",
        )
        self.c.profile_candidates = [p.id for p in listed.profiles]
        return listed.state

    async def _mark_shared(
        self, state: ProfileState, profile_id: str, reason: FailoverReason, now: float
    ) -> ProfileState:
        """Mark a profile failed in the shared store, race-free: the cooldown math runs here
        (SPEC §7.7) and the store takes the result only if nobody changed the profile since we
        read it; otherwise it is computed again from what the other run wrote."""
        for _ in range(MAX_USAGE_UPDATE_TRIES):
            expected = state.usage.get(profile_id)
            marked = mark_failure(
                state,
                profile_id,
                reason,
                provider=self.req.model.provider,
                now=now,
                model_id=self.req.model.model,
            )
            new = marked.usage.get(profile_id)
            if new is None or new == expected:
                return marked  # nothing to record (a timeout, a bypassed provider)
            outcome: UsageUpdateResult = await workflow.execute_local_activity(
                UPDATE_PROFILE_USAGE,
                UsageUpdate(profile_id=profile_id, expected=expected, new=new),
                result_type=UsageUpdateResult,
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                summary=f"mark {profile_id}: {reason.value}",
            )
            if outcome.applied:
                return marked
            usage = dict(state.usage)
            if outcome.current is None:
                usage.pop(profile_id, None)
            else:
                usage[profile_id] = outcome.current
            state = state.model_copy(update={"usage": usage})
        return state

    async def _wait_for_profile(
        self, state: ProfileState, reason: FailoverReason | None, retry_after: float | None
    ) -> bool | None:
        """Beyond the original: when every profile is cooling down for a transient reason, wait
        on a durable timer until the soonest is ready (or the provider's Retry-After, whichever
        is later) instead of failing, up to `max_wait_seconds`. True: waited; False: the wait
        would be too long (or the reason is not transient); None: aborted while waiting."""
        if reason not in (FailoverReason.RATE_LIMIT, FailoverReason.OVERLOADED):
            return False
        now = workflow.time()
        ids = self.c.profile_candidates or []
        expiry = soonest_expiry(state, ids, now, self.req.model.model)
        if expiry is None:
            return False
        until = max(expiry, now + (retry_after or 0.0))
        if until - now > self.req.max_wait_seconds:
            return False
        provider = self.req.model.provider
        text = (
            f"every {provider} profile is cooling down ({reason.value}); waiting "
            f"{math.ceil(until - now)} s for the first to be ready"
        )
        self.phase, self.waiting_until, self.waiting_reason = RunPhase.WAITING, until, reason.value
        workflow.set_current_details(f"run **{self.req.run_id}**: {text}")
        await workflow.execute_local_activity(
            PUBLISH_ANNOUNCEMENTS,
            PublishInput(
                session_key=self.req.session_key,
                run_id=self.req.run_id,
                announce=[
                    Announcement(
                        kind=EventKind.WARNING,
                        ts=now,
                        text=text,
                        data={"code": "waiting_for_profile", "until": until, "reason": reason},
                    )
                ],
            ),
            start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
            summary="announce the wait",
        )
        try:
            await workflow.wait_condition(
                lambda: self.abort_reason is not None,
                timeout=until - now,
                timeout_summary=f"wait for a {provider} profile ({reason.value})",
            )
        except builtins.TimeoutError:
            pass
        finally:
            self.phase, self.waiting_until, self.waiting_reason = RunPhase.STREAMING, None, None
        return None if self.abort_reason is not None else True

    async def _choose_initial_profile(self) -> LoopEnd | None:
        """Before the first model call: the first profile not cooling down (SPEC §7.6), so a
        profile another session found rate-limited is avoided; None when one is usable."""
        if self.req.model.provider == "offline" or not workflow.patched(PROFILE_ROTATION_PATCH):
            return None
        state = await self._list_profiles()
        if not self.c.profile_candidates:
            return None  # no stored profile: the provider's default credentials (or none)
        candidates = candidate_list(self.c.profile_candidates)
        for _ in range(MAX_PROFILE_WAITS):
            now = workflow.time()
            chosen = select_initial(candidates, state, self.req.model.model, now)
            if chosen.index is not None:
                self.c.profile_id = candidates[chosen.index]
                return None
            waited = await self._wait_for_profile(state, chosen.reason, None)
            if waited is None:
                return LoopEnd(TerminationReason.ABORT_SIGNAL)
            if not waited:
                break
            state = await self._list_profiles()
            candidates = candidate_list(self.c.profile_candidates or [])
        now = workflow.time()
        ids = [c for c in candidates if c]
        expiry = soonest_expiry(state, ids, now, self.req.model.model)
        message = (
            rate_limit_cooldown_reply(expiry, now)
            if chosen.reason in (FailoverReason.RATE_LIMIT, FailoverReason.OVERLOADED)
            else f"Every auth profile of {self.req.model.provider} is unavailable "
            f"({chosen.reason.value if chosen.reason else 'unknown'}); see `agentlane auth list`."
        )
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(kind=ExecutionErrorKind.QUOTA_EXCEEDED, message=message),
        )

    def _lower_thinking(self, err: ActivityError) -> str | None:
        """SPEC §6: a provider that refuses the thinking level names what it supports; try the
        next level down once each. None: not a thinking refusal, or nothing left to try."""
        failure = _provider_failure(err)
        if failure is None or failure.reason != "thinking_unsupported":
            return None
        if not workflow.patched(THINKING_FALLBACK_PATCH):
            return None
        attempted = [*self.c.attempted_thinking, self._thinking()]
        self.c.attempted_thinking = attempted
        return pick_fallback_thinking_level(failure.raw_message, attempted)
