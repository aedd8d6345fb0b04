"""The two steps of a schedule's firing (`workflows/scheduled_message.py`), as activities.

`deliver_scheduled_message` sends the schedule's message to its session through the client's own
`send` (update-with-start: the session is created if it does not exist, with the settings a chat
message would give it), as a follow-up (it runs as its own run, after whatever the session is
doing) marked `cron`. Its message id is the firing's workflow id, so a retried attempt is the
session's duplicate of the first and is answered with the first one's number.

`await_scheduled_run` waits until a run has taken that message and ended, heartbeating every few
seconds (a lost worker is noticed after the heartbeat timeout, and the retry simply waits again:
both waits are reads). It costs no history while it waits, one update on the session to learn the
run id, and one small RPC per heartbeat.

The client is handed in by the worker (`workers/main.py`): activities do not import client or
workflow code, and the session is reached exactly as a chat adapter reaches it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from activities.liveness import heartbeat_forever
from agentlane.entry_source import EntrySource
from agentlane.messages import FateState, MessageFate, SendDisposition, SendReceipt
from agentlane.run import ExecutionResult
from agentlane.scheduled_runs import (
    AWAIT_SCHEDULED_RUN,
    DELIVER_SCHEDULED_MESSAGE,
    AwaitRunInput,
    DeliveryInput,
    DeliveryReceipt,
    ScheduledRunOutcome,
)

# The wait sends one heartbeat this often; the workflow's heartbeat timeout is a few times it.
AWAIT_HEARTBEAT_SECONDS = 5.0
# A scheduled message runs as its own run, queued behind whatever the session is doing.
SCHEDULED_MODE = "followup"


class SessionSender(Protocol):
    """What the activities need of `clients.api.AgentlaneClient`."""

    async def send(
        self,
        session_key: str,
        text: str,
        *,
        mode: str | None = None,
        message_id: str | None = None,
        sender: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
        source: EntrySource = EntrySource.CHAT,
        workspace_host: str | None = None,
    ) -> SendReceipt: ...

    async def wait_started(self, session_key: str, seq: int) -> MessageFate: ...

    async def wait_for_run(self, run_id: str) -> ExecutionResult: ...


class Rejected(Exception):
    """What the client raises when the session refuses a message (its `SendRejected`)."""


class ScheduledDelivery:
    def __init__(
        self,
        sender: SessionSender,
        rejected: tuple[type[BaseException], ...] = (Rejected,),
        as_identity: Callable[[str], Awaitable[SessionSender]] | None = None,
    ) -> None:
        self.sender = sender
        # The sender under another client identity: a firing sends as `schedule <id>`, which
        # is what the session's history then says sent it.
        self.as_identity = as_identity
        # The client's "refused" errors: a refusal is final, not a transport fault to retry.
        self.rejected = rejected

    @activity.defn(name=DELIVER_SCHEDULED_MESSAGE)
    async def deliver_scheduled_message(self, inp: DeliveryInput) -> DeliveryReceipt:
        msg = inp.message
        sender = self.sender
        if self.as_identity is not None:
            sender = await self.as_identity(f"schedule {msg.schedule_id}")
        try:
            receipt = await sender.send(
                msg.session_key,
                msg.text,
                mode=SCHEDULED_MODE,
                message_id=inp.message_id,
                # No sender: a firing is the operator's (README), so owner-only tools stay
                # offered; the update's identity still names the schedule.
                sender=None,
                workspace=msg.workspace,
                # Where the schedule's creator checked the folder (older schedules: None).
                workspace_host=msg.workspace_host,
                model=msg.model,
                source=EntrySource.CRON,
            )
        except self.rejected as err:
            raise ApplicationError(
                f"session {msg.session_key} refused the scheduled message: {err}",
                type="ScheduledMessageRejected",
                non_retryable=True,
                # A refusal the firing's record says: one line in the log, not a traceback.
                category=ApplicationErrorCategory.BENIGN,
            ) from err
        seq = receipt.message_seq
        if receipt.disposition == SendDisposition.DUPLICATE and receipt.duplicate_of is not None:
            # An earlier attempt of this firing got through: follow that message.
            seq = receipt.duplicate_of
        return DeliveryReceipt(
            session_key=receipt.session_key,
            message_seq=seq,
            disposition=receipt.disposition.value,
            note=receipt.note,
        )

    @activity.defn(name=AWAIT_SCHEDULED_RUN)
    async def await_scheduled_run(self, inp: AwaitRunInput) -> ScheduledRunOutcome:
        activity.heartbeat()
        beats = asyncio.create_task(heartbeat_forever(AWAIT_HEARTBEAT_SECONDS))
        try:
            return await self._await(inp)
        finally:
            beats.cancel()

    async def _await(self, inp: AwaitRunInput) -> ScheduledRunOutcome:
        fate = await self.sender.wait_started(inp.session_key, inp.message_seq)
        outcome = ScheduledRunOutcome(
            session_key=inp.session_key,
            message_seq=inp.message_seq,
            fate=fate.state.value,
            run_id=fate.run_id,
            note=fate.note,
        )
        if fate.run_id is None or fate.state not in (FateState.STARTED, FateState.STEERED):
            return outcome
        try:
            result = await self.sender.wait_for_run(fate.run_id)
        except WorkflowFailureError as err:
            # Terminated, timed out: the session gives the message back and may retry it in a
            # later run, which this firing does not follow (the next firing is due anyway).
            return outcome.model_copy(
                update={"status": "error", "note": f"the run ended abnormally: {err.cause or err}"}
            )
        return outcome.model_copy(
            update={
                "status": result.status.value,
                "termination_reason": result.termination_reason.value,
                "source": result.source.value,
                "reply": result.reply[:200],
            }
        )
