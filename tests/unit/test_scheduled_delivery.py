"""The firing's two activities over a stand-in session client: a retried delivery follows the
first message (never a second one), a refusal is final, and the wait reports the run's end."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.scheduled_delivery import SCHEDULED_MODE, ScheduledDelivery
from agentlane.entry_source import EntrySource
from agentlane.messages import (
    FateState,
    MessageFate,
    QueueMode,
    SendDisposition,
    SendReceipt,
)
from agentlane.run import ExecutionResult, ExecutionStatus, TerminationReason
from agentlane.scheduled_runs import AwaitRunInput, DeliveryInput, ScheduledMessage


class Refused(Exception):
    pass


class FakeSession:
    def __init__(self) -> None:
        self.sent: list[dict[str, object]] = []
        self.ids: dict[str, int] = {}
        self.refuse = False

    async def send(self, session_key: str, text: str, **kw: object) -> SendReceipt:
        if self.refuse:
            raise Refused("the session's queue is full")
        self.sent.append({"text": text, **kw})
        seq = len(self.sent)
        mid = str(kw["message_id"])
        if mid in self.ids:
            return SendReceipt(
                session_key=session_key,
                message_seq=seq,
                disposition=SendDisposition.DUPLICATE,
                mode=QueueMode.FOLLOWUP,
                duplicate_of=self.ids[mid],
            )
        self.ids[mid] = seq
        return SendReceipt(
            session_key=session_key,
            message_seq=seq,
            disposition=SendDisposition.STARTED,
            mode=QueueMode.FOLLOWUP,
        )

    async def wait_started(self, session_key: str, seq: int) -> MessageFate:
        return MessageFate(seq=seq, state=FateState.STARTED, run_id=f"session:{session_key}:run:7")

    async def wait_for_run(self, run_id: str) -> ExecutionResult:
        now = datetime.now(UTC)
        return ExecutionResult(
            session_key="k",
            run_id=run_id,
            status=ExecutionStatus.SUCCESS,
            termination_reason=TerminationReason.NO_TOOL_CALLS,
            reply="tick",
            started_at=now,
            ended_at=now,
            source=EntrySource.CRON,
        )


def _delivery() -> DeliveryInput:
    msg = ScheduledMessage(schedule_id="tick", session_key="k", text="say tick")
    return DeliveryInput(message=msg, message_id="schedule:tick-2026-01-01T00:00:00Z")


async def test_a_retried_delivery_follows_the_first_message() -> None:
    session = FakeSession()
    acts = ScheduledDelivery(session, rejected=(Refused,))
    env = ActivityEnvironment()
    first = await env.run(acts.deliver_scheduled_message, _delivery())
    again = await env.run(acts.deliver_scheduled_message, _delivery())
    assert first.message_seq == again.message_seq == 1
    assert again.disposition == "duplicate"
    assert session.sent[0]["source"] == EntrySource.CRON
    assert session.sent[0]["mode"] == SCHEDULED_MODE
    # No sender: the operator's (owner-only tools stay offered); the identity names the firing.
    assert session.sent[0]["sender"] is None


async def test_a_refusal_is_final() -> None:
    session = FakeSession()
    session.refuse = True
    acts = ScheduledDelivery(session, rejected=(Refused,))
    with pytest.raises(ApplicationError, match="refused the scheduled message") as err:
        await ActivityEnvironment().run(acts.deliver_scheduled_message, _delivery())
    assert err.value.non_retryable


async def test_the_wait_reports_the_run() -> None:
    acts = ScheduledDelivery(FakeSession(), rejected=(Refused,))
    beats: list[object] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *d: beats.append(d)
    out = await env.run(acts.await_scheduled_run, AwaitRunInput(session_key="k", message_seq=1))
    assert (out.run_id, out.status, out.source, out.reply) == (
        "session:k:run:7",
        "success",
        "cron",
        "tick",
    )
