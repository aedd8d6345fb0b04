"""Removes offloaded payloads once nothing can read them (`agentlane gc`, and every worker on a
timer).

Every payload the SDK offloads has an owner, the workflow whose history references it (the
driver files it under that owner, `agentlane/data_converter.py`). A payload is read only by a
replay of its owner's history (a worker that lost its cache), by a client fetching a result, or,
for the input a run continues as new with, by the next run's replays. So an owner's payloads go:
- once its run closed (completed, failed, cancelled, terminated, timed out) more than `grace`
  ago, or its history is gone (the namespace's retention);
- for a run that continued as new, once the run after it is closed too (its input may be here);
- an owner named without a run (a child's input, stored before the child had a run id), once
  the workflow id's latest run is closed.
Payloads of the flat layout (a client's own large inputs, and everything written by earlier
versions) have no owner: they go after `retention`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from agentlane.data_converter import LocalFileStorageDriver, PayloadOwner

log = logging.getLogger(__name__)


@dataclass
class GcReport:
    owners_removed: int = 0
    owners_kept: int = 0
    files: int = 0
    bytes: int = 0

    def line(self) -> str:
        return (
            f"removed {self.files} payload files ({self.bytes} bytes) of "
            f"{self.owners_removed} closed workflow runs; {self.owners_kept} owners still open"
        )


async def _closed_since(client: Client, workflow_id: str, run_id: str | None) -> datetime | None:
    """When the run (or the id's latest run) closed; None while it is open. A history that is
    gone counts as closed long ago."""
    try:
        desc = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return datetime.fromtimestamp(0, UTC)
        raise
    if desc.status in (None, WorkflowExecutionStatus.RUNNING):
        return None
    if desc.status == WorkflowExecutionStatus.CONTINUED_AS_NEW and run_id is not None:
        # The next run's input may be one of this run's payloads: wait for that run too.
        following = await _next_run(client, workflow_id, run_id)
        if following is None:
            return None
        return await _closed_since(client, workflow_id, following)
    return desc.close_time or datetime.now(UTC)


async def _next_run(client: Client, workflow_id: str, run_id: str) -> str | None:
    """The run a continued-as-new run handed over to (its last history event says)."""
    response = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            maximum_page_size=1,
        )
    )
    for event in response.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            attrs = event.workflow_execution_continued_as_new_event_attributes
            return attrs.new_execution_run_id or None
    return None


async def collect(
    client: Client,
    driver: LocalFileStorageDriver,
    *,
    grace: timedelta,
    retention: timedelta,
    dry_run: bool = False,
) -> GcReport:
    report = GcReport()
    now = datetime.now(UTC)
    owners: list[PayloadOwner] = await asyncio.to_thread(driver.owners)
    for owner in owners:
        try:
            closed = await _closed_since(client, owner.workflow_id, owner.run_id)
        except RPCError as err:
            log.warning("payload gc: could not describe %s: %s", owner.workflow_id, err)
            closed = None
        if closed is None or now - closed < grace:
            report.owners_kept += 1
            continue
        report.owners_removed += 1
        if dry_run:
            continue
        with contextlib.suppress(FileNotFoundError):  # another worker's gc got there first
            files, size = await asyncio.to_thread(driver.remove_owner, owner)
            report.files += files
            report.bytes += size
    if not dry_run:
        cutoff = time.time() - retention.total_seconds()
        files, size = await asyncio.to_thread(driver.remove_unowned_older_than, cutoff)
        report.files += files
        report.bytes += size
    return report


async def collect_forever(
    client: Client,
    driver: LocalFileStorageDriver,
    *,
    interval: timedelta,
    grace: timedelta,
    retention: timedelta,
) -> None:
    """A worker's background clean-up (every `interval`); never raises out."""
    while True:
        await asyncio.sleep(interval.total_seconds())
        try:
            report = await collect(client, driver, grace=grace, retention=retention)
        except Exception as err:  # the next round tries again
            log.warning("payload gc failed: %s", err)
            continue
        if report.files:
            log.info("payload gc: %s", report.line())
