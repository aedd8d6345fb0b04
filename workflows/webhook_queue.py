"""The session's webhook delivery queue (issue 11): workflow side.

One coroutine per session execution works through `WebhookState.queue` one run at a time, with
one `deliver_webhooks` activity per run window (`activities/webhook_delivery.py` says why this
shape and what it costs). The state it keeps is small and is carried across continue-as-new by
the session (`SessionState.webhook`).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from agentlane.messages import Routing
    from agentlane.run import ExecutionResult, ExecutionStatus
    from agentlane.webhooks import (
        DELIVER_WEBHOOKS,
        MAX_ERROR_CHARS,
        DeliverInput,
        DeliverResult,
        PendingRun,
        RunDeliveryInfo,
        RunEnd,
        WebhookState,
        WebhookStatus,
        WebhookTarget,
        default_secret_ref,
        webhook_task_queue,
    )

# Recorded when a session first takes a callback URL (histories from before never do).
WEBHOOK_PATCH = "webhook-delivery"
# A run is followed this long per activity; the session schedules the next window.
WINDOW = timedelta(minutes=10)
# Unlimited attempts, 1 s doubling to a minute: a callback down for an hour costs ~65 attempts,
# loses nothing, and is found again within a minute of coming back. A run's window that has
# not got through within a day is given up (counted in `runs_failed`, `last_error`).
WEBHOOK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=1),
    maximum_attempts=0,
)
WEBHOOK_SCHEDULE_TO_CLOSE = timedelta(days=1)
WEBHOOK_START_TO_CLOSE = WINDOW + timedelta(minutes=2)
WEBHOOK_HEARTBEAT_TIMEOUT = timedelta(seconds=30)


def target_of(routing: Routing, session_key: str) -> WebhookTarget | None:
    if routing.callback_url is None:
        return None
    return WebhookTarget(
        url=routing.callback_url,
        secret_ref=routing.callback_secret_ref or default_secret_ref(session_key),
        channel=routing.channel,
        to=routing.to,
        account=routing.account,
        thread=routing.thread,
    )


def run_end_of(result: ExecutionResult) -> RunEnd:
    error = result.error
    return RunEnd(
        status=result.status.value,
        last_entry_id=result.last_entry_id if result.status == ExecutionStatus.SUCCESS else None,
        error_code=error.kind.value if error is not None else None,
        error_message=error.message[:MAX_ERROR_CHARS] if error is not None else None,
    )


class WebhookQueue:
    def __init__(self, session_key: str, state: WebhookState) -> None:
        self.key = session_key
        self.s = state
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    # -- called by the session ---------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def run_started(self, run_id: str) -> None:
        self.s.queue.append(PendingRun(run_id=run_id))

    def run_ended(self, run_id: str, end: RunEnd) -> None:
        for item in self.s.queue:
            if item.run_id == run_id:
                item.ended = end

    def run_info(self, run_id: str) -> RunDeliveryInfo:
        for item in self.s.queue:
            if item.run_id == run_id:
                return RunDeliveryInfo(known=True, ended=item.ended)
        return RunDeliveryInfo(known=False)

    def idle(self) -> bool:
        return not self.s.queue

    async def stop(self) -> None:
        """Before continue-as-new: cancel the window in flight (its run stays at the head of the
        queue; the next execution resumes from the last window's offset)."""
        self._stopping = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def status(self) -> WebhookStatus:
        s = self.s
        return WebhookStatus(
            url=s.target.url,
            secret_ref=s.target.secret_ref,
            delivered=s.delivered,
            pending_runs=len(s.queue),
            current_run_id=s.queue[0].run_id if s.queue else None,
            runs_delivered=s.runs_delivered,
            runs_failed=s.runs_failed,
            last_error=s.last_error,
            last_delivered_id=s.last_delivered_id,
            last_delivered_at=s.last_delivered_at,
        )

    def summary(self) -> str:
        s = self.s
        line = f"webhook: {s.delivered} delivered, {len(s.queue)} run(s) pending"
        if s.last_error:
            line += f"; last error: {s.last_error[:120]}"
        return line

    # -- the delivery coroutine --------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopping:
            await workflow.wait_condition(lambda: bool(self.s.queue) or self._stopping)
            if self._stopping:
                return
            head = self.s.queue[0]
            try:
                result: DeliverResult = await workflow.execute_activity(
                    DELIVER_WEBHOOKS,
                    DeliverInput(
                        session_key=self.key,
                        run_id=head.run_id,
                        target=self.s.target,
                        from_offset=self.s.offset,
                        cursor=self.s.cursor,
                        window_seconds=WINDOW.total_seconds(),
                    ),
                    result_type=DeliverResult,
                    task_queue=webhook_task_queue(workflow.info().task_queue),
                    start_to_close_timeout=WEBHOOK_START_TO_CLOSE,
                    schedule_to_close_timeout=WEBHOOK_SCHEDULE_TO_CLOSE,
                    heartbeat_timeout=WEBHOOK_HEARTBEAT_TIMEOUT,
                    retry_policy=WEBHOOK_RETRY,
                    summary=f"webhook {head.run_id} -> {self.s.target.url}"[:200],
                )
            except ActivityError as err:
                if self._stopping or isinstance(err.cause, CancelledError):
                    # Cancelled for a handover: the run stays at the head of the queue.
                    return
                # A day of failed attempts: give this run up, visibly, and go on with the next.
                cause = err.cause
                message = getattr(cause, "message", None) or str(cause or err)
                if isinstance(cause, ApplicationError) and cause.__cause__ is not None:
                    message += f" ({cause.__cause__})"
                self.s.last_error = f"{head.run_id} given up: {message}"[:MAX_ERROR_CHARS]
                self.s.runs_failed += 1
                self.s.queue.pop(0)
                self.s.cursor = None
                continue
            self._record(result)
            if result.done:
                self.s.queue.pop(0)
                self.s.runs_delivered += 1

    def _record(self, result: DeliverResult) -> None:
        s = self.s
        if result.delivered:
            s.delivered += result.delivered
            s.last_delivered_id = result.last_id
            s.last_delivered_at = workflow.time()
            s.last_error = None
        s.offset = result.offset
        s.cursor = result.cursor
