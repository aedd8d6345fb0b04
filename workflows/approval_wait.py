"""Approvals that wait durably (issue 21): the run's side, one call from the run loop just before
a tool call is dispatched.

A call whose tool `[tools.approval].require` names waits here on a durable timer: a workflow
`wait_condition` with a timeout, so no worker slot is held and a worker killed meanwhile changes
nothing (the timer and the decision are in history). The session lists the approval (it is told
by signal) and takes decisions (`SessionWorkflow.decide_approval`, an update with a validator);
it forwards each to this run by signal (`AgentRunWorkflow.decide_approval`). An abort cancels
the run loop, and so this wait, at once. What each ending means is `workflows/policy/approvals`.

A sub-agent's run has no session workflow of its own: it tells its top-level session instead
(`ExecutionRequest.root_session_key`), which lists the approval beside its own run's, decides it
by signalling this run directly, and gets its events on its stream too. The timer is this run's,
so a sub-agent's approval expires like any other.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agentlane.approvals import (
        APPROVAL_STEP,
        ApprovalClosed,
        ApprovalConfig,
        ApprovalDecision,
        ApprovalOutcome,
        ApprovalStepInput,
        PendingApproval,
    )
    from agentlane.errors import ExecutionErrorKind
    from agentlane.events import Announcement, EventKind
    from agentlane.ids import session_workflow_id
    from agentlane.model_calls import ToolCallRef
    from agentlane.run import ExecutionError, TerminationReason
    from agentlane.session import RunPhase
    from agentlane.tool_calls import ToolCallOutcome
    from workflows import activity_options as opts
    from workflows.loop_end import LoopEnd
    from workflows.patches import SUBAGENT_CANCEL_TOLD_PATCH
    from workflows.policy.approvals import (
        args_preview,
        denied_text,
        duration_words,
        expired_abort_message,
        expired_text,
        needs_approval,
        on_expiry,
    )

if TYPE_CHECKING:
    from workflows.agent_run import AgentRunWorkflow

# Runs recorded before approvals never waited (and nothing required approval then).
APPROVALS_PATCH = "approvals-wait"
# The session's signals (by name: the session module imports the run's).
APPROVAL_OPENED_SIGNAL = "approval_opened"
APPROVAL_CLOSED_SIGNAL = "approval_closed"
WAITING_REASON = "approval"


class ApprovalWait:
    def __init__(self, run: AgentRunWorkflow) -> None:
        self.r = run
        self.waiting: PendingApproval | None = None
        self.decision: ApprovalDecision | None = None

    def decide(self, decision: ApprovalDecision) -> None:
        """A decision forwarded by the session: taken if it is for the approval waiting now (the
        session's validator already refused unknown and decided ids)."""
        if self.waiting is not None and decision.id == self.waiting.id and self.decision is None:
            self.decision = decision

    async def gate(
        self, turn: int, entry_id: str, call: ToolCallRef
    ) -> LoopEnd | ToolCallOutcome | None:
        """None: run the call. A `ToolCallOutcome`: the call was answered without running
        (denied, expired). A `LoopEnd`: the run stops (expired with on_timeout = "abort")."""
        config = self.r.req.approvals
        # Asked only when a call needs approval: runs without approvals leave no marker.
        if config is None or not needs_approval(call.name, config):
            return None
        if not self.r.patches(APPROVALS_PATCH):
            return None
        r = self.r
        now = workflow.time()
        timeout = config.timeout_seconds
        approval = PendingApproval(
            id=workflow.uuid4().hex[:8],
            run_id=r.req.run_id,
            tool_call_id=call.id,
            tool=call.name,
            args_preview=args_preview(call.summary),
            requested_at=now,
            expires_at=now + timeout,
            on_timeout=config.on_timeout,
            session_key=r.req.session_key if self._subagent else "",
            root_run_id=r.req.root_run_id or "",
        )
        self.waiting, self.decision = approval, None
        r.phase, r.waiting_reason = RunPhase.WAITING, WAITING_REASON
        r.waiting_until = approval.expires_at
        r.show(
            f"waiting for approval **{approval.id}** of {approval.tool}: {approval.args_preview}"
        )
        await self._step(turn, entry_id, call, self._requested(turn, approval))
        await self._tell_session(APPROVAL_OPENED_SIGNAL, approval)
        try:
            await workflow.wait_condition(
                lambda: self.decision is not None,
                timeout=timeout,
                timeout_summary=f"approval {approval.id} ({duration_words(timeout)})",
            )
        except TimeoutError:
            pass
        except asyncio.CancelledError:
            # Aborted (or out of budget): the session closes the run's approvals when it ends;
            # the event goes out with finish_run.
            decided = self._decided(turn, approval, ApprovalOutcome.CANCELLED, "")
            r.announce.append(decided)
            if self._subagent:
                # The top-level session's run may go on (this sub-agent alone was cancelled):
                # it is told the approval no longer waits.
                closed = ApprovalClosed(id=approval.id, outcome=ApprovalOutcome.CANCELLED)
                await self._tell_session(APPROVAL_CLOSED_SIGNAL, closed)
                if r.patches(SUBAGENT_CANCEL_TOLD_PATCH):
                    # Where people watch (the top-level session's stream and webhook), the
                    # card closes: this run's end publishes only to the sub-agent's own.
                    await self._step(turn, entry_id, call, [decided])
            raise
        finally:
            self.waiting = None
            r.phase, r.waiting_until, r.waiting_reason = RunPhase.TOOLS, None, None
        return await self._decided_call(turn, entry_id, call, approval, self.decision)

    async def _decided_call(
        self,
        turn: int,
        entry_id: str,
        call: ToolCallRef,
        approval: PendingApproval,
        decision: ApprovalDecision | None,
    ) -> LoopEnd | ToolCallOutcome | None:
        r = self.r
        config = r.req.approvals or ApprovalConfig()
        timeout = config.timeout_seconds
        if decision is None:
            outcome, reason = ApprovalOutcome.EXPIRED, ""
            answer = expired_text(call.name, timeout)
        elif decision.approve:
            outcome, reason, answer = ApprovalOutcome.APPROVED, decision.reason, ""
        else:
            outcome, reason = ApprovalOutcome.DENIED, decision.reason
            answer = denied_text(call.name, decision.reason, decision.by)
        await self._tell_session(
            APPROVAL_CLOSED_SIGNAL, ApprovalClosed(id=approval.id, outcome=outcome, reason=reason)
        )
        decided = self._decided(turn, approval, outcome, reason, decision)
        effect = on_expiry(config)
        if outcome == ApprovalOutcome.EXPIRED and effect.aborts_run:
            # finish_run answers the call (and any after it) saying the approval expired.
            r.announce.append(decided)
            message = expired_abort_message(call.name, timeout)
            r.abort_reason = r.abort_reason or message
            return LoopEnd(
                TerminationReason.ABORT_SIGNAL,
                ExecutionError(kind=ExecutionErrorKind.ABORTED, message=message),
                unanswered=answer,
            )
        r.show(f"approval {approval.id} {outcome.value}")
        await self._step(turn, entry_id, call, [decided], answer=answer, summary=outcome.value)
        if outcome == ApprovalOutcome.APPROVED:
            return None
        return ToolCallOutcome(is_error=True, summary=outcome.value)

    def _requested(self, turn: int, approval: PendingApproval) -> list[Announcement]:
        return [
            Announcement(
                kind=EventKind.APPROVAL_REQUESTED,
                ts=approval.requested_at,
                turn_index=turn,
                text=f"{approval.tool} waits for approval {approval.id}: {approval.args_preview}",
                data={
                    "tool_call_id": approval.tool_call_id,
                    **approval.model_dump(mode="json", exclude={"tool_call_id"}),
                },
            )
        ]

    @staticmethod
    def _decided(
        turn: int,
        approval: PendingApproval,
        outcome: ApprovalOutcome,
        reason: str,
        decision: ApprovalDecision | None = None,
    ) -> Announcement:
        return Announcement(
            kind=EventKind.APPROVAL_DECIDED,
            ts=workflow.time(),
            turn_index=turn,
            text=f"approval {approval.id} of {approval.tool}: {outcome.value}",
            data={
                "tool_call_id": approval.tool_call_id,
                "id": approval.id,
                "tool": approval.tool,
                "outcome": outcome.value,
                "reason": reason,
                "by": decision.by if decision is not None else "",
            },
        )

    @property
    def _subagent(self) -> bool:
        return bool(self.r.req.root_session_key)

    async def _step(
        self,
        turn: int,
        entry_id: str,
        call: ToolCallRef,
        announce: list[Announcement],
        answer: str = "",
        summary: str = "",
    ) -> None:
        r = self.r
        await workflow.execute_local_activity(
            APPROVAL_STEP,
            ApprovalStepInput(
                session_key=r.req.session_key,
                run_id=r.req.run_id,
                turn_index=turn,
                assistant_entry_id=entry_id,
                tool_call_id=call.id,
                tool_name=call.name,
                announce=announce,
                answer=answer,
                summary=summary,
                notify_session_key=r.req.root_session_key or "",
            ),
            start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
            retry_policy=opts.FINISH_RETRY,
            summary=f"approval: {call.name} {summary or 'requested'}",
        )

    async def _tell_session(self, signal: str, arg: PendingApproval | ApprovalClosed) -> None:
        # A sub-agent's approvals are its top-level session's to list and decide.
        key = self.r.req.root_session_key or self.r.req.session_key
        session = workflow.get_external_workflow_handle(session_workflow_id(key))
        try:
            await session.signal(signal, arg)
        except Exception as err:  # the session is gone: nobody can decide; the timer still ends
            workflow.logger.warning("approval: could not tell the session: %s", err)
