"""Timeouts and retry policies for the activities the workflows schedule.

Two clocks (DESIGN decision 4): the heartbeat timeout notices a dead worker within seconds, while
the model's own 120 s idle limit is enforced inside the activity. Temporal's retries are for
transport faults and lost workers only; typed provider failures are non-retryable and decided by
the run workflow.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

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
EXEC_GRACE = timedelta(seconds=60)

FINISH_START_TO_CLOSE = timedelta(seconds=60)
FINISH_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=20)


# exec enforces its own timeout (the call may ask for up to an hour); the activity's limit only
# has to be above it. A dead worker is noticed through heartbeats long before.
EXEC_START_TO_CLOSE = timedelta(seconds=3600) + EXEC_GRACE


def tool_start_to_close(tool: str) -> timedelta:
    return EXEC_START_TO_CLOSE if tool == "exec" else FILE_TOOL_START_TO_CLOSE
