"""A session's background processes are stopped when it is reset or closed (issue 21): what was
started for a context that is gone must not run on unowned. The contracts and the why are in
`agentlane/process_stop.py`; the activities in `activities/process_stop.py`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from agentlane.process_stop import (
        LIST_PROCESS_OWNERS,
        STOP_SESSION_PROCESSES,
        ProcessesStopped,
        ProcessOwners,
        SessionProcesses,
    )
    from agentlane.settings import host_task_queue
    from workflows import activity_options as opts

# Resets and closes recorded before this stopped nothing.
STOP_PROCESSES_PATCH = "stop-processes-on-reset-and-close"
STOP_TIMEOUT = timedelta(seconds=30)
# Listing reads a few small records: a worker that dies holding the call is given up on fast,
# and the retry lands on a live worker of the host (it took 30 s, the session open meanwhile).
LIST_TIMEOUT = timedelta(seconds=5)
# A worker that dies while stopping takes its processes along: one attempt is enough.
STOP_RETRY = RetryPolicy(maximum_attempts=2)


async def stop_background_processes(
    session_key: str,
    patched: Callable[[str], bool] = workflow.patched,
    host: str | None = None,
) -> list[str]:
    """Stop the session's running background processes in every worker holding one; the ids
    stopped. Never fails: a worker gone, or a record unreadable, leaves nothing to stop.
    `patched`: the caller's `Patches.own_marker`. `host`: the host whose disk holds the
    session's workspace (workspaces per host), where its processes' records are; they are
    listed there (the caller has checked `STOP_ON_HOST_PATCH`), not on whichever host runs the
    workflow, whose folder has none of them."""
    if not patched(STOP_PROCESSES_PATCH):
        return []
    inp = SessionProcesses(session_key=session_key)
    summary = "background processes to stop"
    try:
        owners: ProcessOwners
        if host is not None:
            owners = await workflow.execute_activity(
                LIST_PROCESS_OWNERS,
                inp,
                result_type=ProcessOwners,
                task_queue=host_task_queue(workflow.info().task_queue, host),
                schedule_to_start_timeout=opts.OWNER_SCHEDULE_TO_START,
                start_to_close_timeout=LIST_TIMEOUT,
                retry_policy=STOP_RETRY,
                summary=f"{summary} on host {host}",
            )
        else:
            owners = await workflow.execute_local_activity(
                LIST_PROCESS_OWNERS,
                inp,
                result_type=ProcessOwners,
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                retry_policy=STOP_RETRY,
                summary=summary,
            )
    except (ActivityError, ApplicationError) as err:
        workflow.logger.warning("background processes not listed: %s", err)
        return []
    stopped: list[str] = []
    for queue in owners.queues:
        try:
            done: ProcessesStopped = await workflow.execute_activity(
                STOP_SESSION_PROCESSES,
                inp,
                result_type=ProcessesStopped,
                task_queue=queue,
                schedule_to_start_timeout=opts.OWNER_SCHEDULE_TO_START,
                start_to_close_timeout=STOP_TIMEOUT,
                retry_policy=STOP_RETRY,
                summary="stop background processes",
            )
        except ActivityError as err:
            workflow.logger.info("background processes on %s not stopped: %s", queue, err)
            continue
        stopped += done.stopped
    return stopped
