"""Timeouts and retry policies for the activities the workflows schedule.

Two clocks (DESIGN decision 4): the heartbeat timeout notices a dead worker within seconds, while
the model's own 120 s idle limit is enforced inside the activity. Temporal's retries are for
lost workers (and faults outside the provider call); every provider failure, transport faults
included, is non-retryable and decided by the run workflow (issue 24: its waits are durable,
abortable and counted in the run's wait budget).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from agentlane.tool_catalog import RUN_ONCE_TOOLS, TOOLS

HEARTBEAT_TIMEOUT = timedelta(seconds=3)

MODEL_CALL_START_TO_CLOSE = timedelta(hours=1)
MODEL_CALL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=8,
)

TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=5,
)
FILE_TOOL_START_TO_CLOSE = timedelta(minutes=2)

# read, write and edit take milliseconds and touch only the workspace:
# they run as local activities, inside the workflow task, in the worker that already holds the
# run, each recorded as one marker event instead of a scheduled/started/completed activity plus a
# second workflow task (measured: about 5 ms and 0.7 KB of history less per step). What they give
# up is what such short calls never use: heartbeats, and signals seen while they run. exec can
# run for an hour, streams output and must be cancellable at once, so it stays a regular
# activity, like the model call (its own task queue is the global lane).
LOCAL_TOOLS = frozenset(t.name for t in TOOLS if t.local)
# Runs recorded before this change replay with regular activities (`workflow.patched`).
LOCAL_ACTIVITIES_PATCH = "short-steps-as-local-activities"
# A local activity past 80% of the workflow task timeout (10 s) makes the SDK heartbeat the
# workflow task (3 events each time): fine for the rare slow disk, while a stuck call is still
# retried well before the regular activity's two minutes.
LOCAL_TOOL_START_TO_CLOSE = timedelta(seconds=30)
EXEC_GRACE = timedelta(seconds=60)

# finish_run waits for the run's events to reach the stream and checks them (a signal and a
# few queries to the events workflow): on a busy worker that takes over a second, which as a
# local activity would all count inside the run's last workflow task (issue 26: no task over
# 1 s). It runs as a regular activity; runs recorded before replay as they were.
FINISH_AS_ACTIVITY_PATCH = "finish-run-as-activity"
FINISH_START_TO_CLOSE = timedelta(seconds=60)
LOCAL_FINISH_START_TO_CLOSE = timedelta(seconds=30)
FINISH_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=20)


# exec enforces its own timeout (the call may ask for up to an hour); the activity's limit only
# has to be above it. A dead worker is noticed through heartbeats long before.
EXEC_START_TO_CLOSE = timedelta(seconds=3600) + EXEC_GRACE


# How long a call about a background process waits for the worker that holds it (on that
# worker's own queue) before the worker counts as gone. Its queue serves only such calls, which
# take seconds at most, so a live worker picks one up at once.
OWNER_SCHEDULE_TO_START = timedelta(seconds=10)


def tool_start_to_close(tool: str) -> timedelta:
    return EXEC_START_TO_CLOSE if tool == "exec" else FILE_TOOL_START_TO_CLOSE


# A tool that is never run again (exec, process) loses its work when an attempt times out: the
# retry can only say it was interrupted. Heartbeats that cannot reach a restarting server (a few
# seconds) are not a dead worker; 15 s rides them out, and a dead worker's command, which died
# with it, is reported 12 s later than with the 3 s of the others.
RUN_ONCE_HEARTBEAT_TIMEOUT = timedelta(seconds=15)


def tool_heartbeat_timeout(tool: str) -> timedelta:
    return RUN_ONCE_HEARTBEAT_TIMEOUT if tool in RUN_ONCE_TOOLS else HEARTBEAT_TIMEOUT
