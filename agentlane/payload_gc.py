"""Removes offloaded payloads once nothing can read them (`agentlane gc`, and every worker on a
timer), on either backend of the store, and the files earlier versions offloaded.

Every payload the SDK offloads has an owner, the workflow whose history references it (the
driver records it with that owner, `store/payload_driver.py`; one payload can have several).
A payload is read only by a replay of its owner's history (a worker that lost its cache), by a
client fetching a result, or, for the input a run continues as new with, by the next run's
replays. So an owner is released, and a payload no owner holds any more goes:
- once its run closed (completed, failed, cancelled, terminated, timed out) more than `grace`
  ago, or its history is gone (the namespace's retention);
- for a run that continued as new, once the run after it has closed too, in any way,
  continuing as new included (that run's input may be here; a long-lived session's older runs
  so release theirs one by one, not all at its very end);
- an owner named without a run (a child's input, stored before the child had a run id; a
  message a client sent to a session), once the workflow id's latest run is closed, and what
  it stored before a later run of the id started, once that run has closed (a long-lived
  session's messages go run by run);
- a child run that continued from another, also not before the parent run that awaited it has
  closed (the parent's replays read the child's result, which such a run owns itself).
Payloads without an owner (a client's own large input, stored before its workflow existed; the
flat file layout of earlier versions) go `retention` after they were last stored.
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
from store.interface import Store
from store.models import PayloadOwnerRef

log = logging.getLogger(__name__)


@dataclass
class GcReport:
    owners_removed: int = 0
    owners_kept: int = 0
    payloads: int = 0
    files: int = 0
    bytes: int = 0

    def line(self) -> str:
        return (
            f"removed {self.payloads} payloads and {self.files} payload files "
            f"({self.bytes} bytes) of {self.owners_removed} closed workflow runs; "
            f"{self.owners_kept} owners still open"
        )


async def _closed_since(
    client: Client, workflow_id: str, run_id: str | None, *, follow: bool = True
) -> datetime | None:
    """When the run (or the id's latest run) closed, for a run that continued as new when the
    run after it closed (`follow`); None while it is open. A history that is gone counts as
    closed long ago."""
    try:
        desc = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return datetime.fromtimestamp(0, UTC)
        raise
    if desc.status in (None, WorkflowExecutionStatus.RUNNING):
        return None
    if follow and desc.status == WorkflowExecutionStatus.CONTINUED_AS_NEW and run_id is not None:
        # The next run's input may be one of this run's payloads: wait for that run to close
        # (its own continuing as new counts: what it hands on, it owns).
        following = await _next_run(client, workflow_id, run_id)
        if following is None:
            return None
        return await _closed_since(client, workflow_id, following, follow=False)
    closed = desc.close_time or datetime.now(UTC)
    first_run = desc.raw_description.workflow_execution_info.first_run_id
    if desc.parent_id and first_run and first_run != desc.run_id:
        # A child that continued as new stores its result under itself (the SDK names the
        # parent only for a first run's result), and the parent run that awaited it reads it
        # on every replay: wait for that run to close too.
        parent = await _closed_since(client, desc.parent_id, desc.parent_run_id, follow=False)
        if parent is None:
            return None
        closed = max(closed, parent)
    return closed


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


async def _later_run_closed(
    client: Client, owner: PayloadOwnerRef, closed_before: datetime
) -> float | None:
    """For an owner without a run: the start (epoch seconds) of the latest run of its workflow
    id that started after the owner's oldest payload was stored and closed before
    `closed_before`; None if none has. What was stored before that run started was read by a
    run before it, or by that run (a message accepted at its start), all closed now."""
    if "'" in owner.workflow_id or "\\" in owner.workflow_id:
        return None  # not quotable in a visibility query: kept until the latest run closes
    since = datetime.fromtimestamp(owner.oldest, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    latest: datetime | None = None
    query = (
        f"WorkflowId = '{owner.workflow_id}' AND StartTime > '{since}' "
        "AND ExecutionStatus != 'Running'"
    )
    async for run in client.list_workflows(query):
        if run.close_time is not None and run.close_time <= closed_before:
            latest = run.start_time if latest is None else max(latest, run.start_time)
    return None if latest is None else latest.timestamp()


class _Closed:
    """Whether owners are past their grace, asking Temporal once per workflow run."""

    def __init__(self, client: Client, grace: timedelta) -> None:
        self.client = client
        self.grace = grace
        self.now = datetime.now(UTC)
        self._seen: dict[tuple[str, str | None], bool] = {}

    async def __call__(self, workflow_id: str, run_id: str | None) -> bool:
        place = (workflow_id, run_id)
        if place not in self._seen:
            try:
                closed = await _closed_since(self.client, workflow_id, run_id)
            except RPCError as err:
                log.warning("payload gc: could not describe %s: %s", workflow_id, err)
                closed = None
            self._seen[place] = closed is not None and self.now - closed >= self.grace
        return self._seen[place]


async def collect(
    client: Client,
    store: Store,
    files: LocalFileStorageDriver | None = None,
    *,
    grace: timedelta,
    retention: timedelta,
    dry_run: bool = False,
) -> GcReport:
    """One round: release the owners whose runs closed `grace` ago, then remove what no owner
    holds (in the store, and the files earlier versions offloaded under `files`)."""
    report = GcReport()
    closed = _Closed(client, grace)
    started = time.time()
    cutoff = started - retention.total_seconds()
    for owner in await store.payload_owners():
        # What the owner stored before this bound, nothing can read any more.
        bound: float | None = started
        if not await closed(owner.workflow_id, owner.run_id):
            bound = None
            if owner.run_id is None:
                bound = await _later_run_closed(client, owner, closed.now - grace)
        if bound is None:
            report.owners_kept += 1
            continue
        report.owners_removed += 1
        if not dry_run:
            await store.release_payload_owner(owner, bound)
    if not dry_run:
        report.payloads, report.bytes = await store.sweep_payloads(cutoff)
    if files is not None:
        await _collect_files(files, closed, report, cutoff, dry_run)
    return report


async def _collect_files(
    driver: LocalFileStorageDriver, closed: _Closed, report: GcReport, cutoff: float, dry_run: bool
) -> None:
    owners: list[PayloadOwner] = await asyncio.to_thread(driver.owners)
    for owner in owners:
        if not await closed(owner.workflow_id, owner.run_id):
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
        files, size = await asyncio.to_thread(driver.remove_unowned_older_than, cutoff)
        report.files += files
        report.bytes += size


async def collect_forever(
    client: Client,
    store: Store,
    files: LocalFileStorageDriver | None,
    *,
    interval: timedelta,
    grace: timedelta,
    retention: timedelta,
) -> None:
    """A worker's background clean-up (every `interval`); never raises out."""
    while True:
        await asyncio.sleep(interval.total_seconds())
        try:
            report = await collect(client, store, files, grace=grace, retention=retention)
        except Exception as err:  # the next round tries again
            log.warning("payload gc failed: %s", err)
            continue
        if report.payloads or report.files:
            log.info("payload gc: %s", report.line())
