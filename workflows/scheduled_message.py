"""ScheduledMessageWorkflow: one firing of a schedule (issue 12; `clients/schedules.py` makes
the schedules).

It delivers the schedule's message to its session as a chat message marked `cron` (so the run
builds the same ExecutionRequest, with source `cron`), then waits until the run that took it has
ended and returns how it ended. Because a firing lasts as long as its run, the schedule's overlap
policy (skip by default) gives "at most one cron run at a time per schedule" (SPEC §2: the cron
lane runs one at a time), with Temporal counting the skipped firings.

No timeout of its own: the run has its 48 h budget and nothing shorter applies to cron runs
(SPEC §4.6). The wait is a heartbeating activity, so a lost worker is noticed and another one
waits on; it adds no history while it waits.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from agentlane.run import RUN_BUDGET_SECONDS
    from agentlane.scheduled_runs import (
        AWAIT_SCHEDULED_RUN,
        DELIVER_SCHEDULED_MESSAGE,
        AwaitRunInput,
        DeliveryInput,
        DeliveryReceipt,
        ScheduledMessage,
        ScheduledRunOutcome,
        schedules_task_queue,
    )

# Sending is one update-with-start (seconds); retried while the server or the session's worker
# is away, each retry being the session's duplicate of the first.
DELIVERY_START_TO_CLOSE = timedelta(minutes=2)
DELIVERY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
)
# The message may wait behind a chat run (up to its budget), then runs for up to its own.
AWAIT_START_TO_CLOSE = timedelta(seconds=2 * RUN_BUDGET_SECONDS + 3600)
AWAIT_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
AWAIT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10)
)


@workflow.defn(name="ScheduledMessageWorkflow")
class ScheduledMessageWorkflow:
    @workflow.run
    async def run(self, msg: ScheduledMessage) -> ScheduledRunOutcome:
        info = workflow.info()
        queue = schedules_task_queue(info.task_queue)
        workflow.set_current_details(f"sending to session **{msg.session_key}**")
        receipt: DeliveryReceipt = await workflow.execute_activity(
            DELIVER_SCHEDULED_MESSAGE,
            # The workflow id is `schedule:<id>-<scheduled time>`: one per firing.
            DeliveryInput(message=msg, message_id=info.workflow_id),
            result_type=DeliveryReceipt,
            task_queue=queue,
            start_to_close_timeout=DELIVERY_START_TO_CLOSE,
            retry_policy=DELIVERY_RETRY,
            summary=f"send to session {msg.session_key}",
        )
        workflow.set_current_details(
            f"message #{receipt.message_seq} in session **{msg.session_key}** "
            f"({receipt.disposition}); waiting for its run"
        )
        outcome: ScheduledRunOutcome = await workflow.execute_activity(
            AWAIT_SCHEDULED_RUN,
            AwaitRunInput(session_key=msg.session_key, message_seq=receipt.message_seq),
            result_type=ScheduledRunOutcome,
            task_queue=queue,
            start_to_close_timeout=AWAIT_START_TO_CLOSE,
            heartbeat_timeout=AWAIT_HEARTBEAT_TIMEOUT,
            retry_policy=AWAIT_RETRY,
            summary=f"wait for the run of message #{receipt.message_seq}",
        )
        workflow.set_current_details(
            f"run **{outcome.run_id or '-'}**: {outcome.status or outcome.fate}"
        )
        return outcome
