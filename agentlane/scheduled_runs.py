"""Scheduled runs (issue 12): what a Temporal Schedule's firing carries, what its activities take
and give back, and the names every role derives from a schedule id.

A schedule's action starts one `ScheduledMessageWorkflow` per firing. It sends the schedule's
message to its session exactly as a chat message is sent (marked `cron`), then waits for the run
that took it to end: the firing lives as long as its run, so the schedule's overlap policy
(skip, by default) is what keeps at most one cron run of a schedule going at a time.

Nothing here holds a secret: the message text, the session key and ids only.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

SCHEDULED_MESSAGE_WORKFLOW = "ScheduledMessageWorkflow"
DELIVER_SCHEDULED_MESSAGE = "deliver_scheduled_message"
AWAIT_SCHEDULED_RUN = "await_scheduled_run"
# Waiting for a run holds an activity slot for the run's whole length: these activities get
# their own task queue and slots, so they never hold the tool calls' slots.
MAX_CONCURRENT_SCHEDULED_WAITS = 200

SCHEDULE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")


class InvalidScheduleId(ValueError):
    pass


def check_schedule_id(schedule_id: str) -> str:
    if not SCHEDULE_ID_PATTERN.fullmatch(schedule_id) or ".." in schedule_id:
        raise InvalidScheduleId(
            f"invalid schedule id {schedule_id!r}: use 1-128 characters from letters, digits "
            "and ._@:- starting with a letter or digit"
        )
    return schedule_id


def firing_workflow_id(schedule_id: str) -> str:
    """The id the schedule gives its firings; the server appends each firing's time to it."""
    return f"schedule:{schedule_id}"


def schedules_task_queue(workflow_task_queue: str) -> str:
    return f"{workflow_task_queue}-schedules"


class ScheduledMessage(BaseModel):
    """The schedule's action argument: the same for every firing. Stored in the schedule for
    as long as it lives, so unknown fields are ignored (a worker older than the client that made
    the schedule still fires it)."""

    schedule_id: str
    session_key: str
    text: str
    # Used only when the firing creates the session (as for a chat message).
    workspace: str | None = None
    model: str | None = None
    # The host whose disk holds `workspace` (workspaces per host): the creating client's, not
    # that of whichever worker runs a firing.
    workspace_host: str | None = None


class DeliveryInput(BaseModel):
    message: ScheduledMessage
    # Derived from the firing (its workflow id holds the scheduled time): a retried delivery
    # is the session's duplicate, never a second message.
    message_id: str


class DeliveryReceipt(BaseModel):
    session_key: str
    message_seq: int
    disposition: str
    note: str = ""


class AwaitRunInput(BaseModel):
    session_key: str
    message_seq: int


class ScheduledRunOutcome(BaseModel):
    """What became of one firing's message: the run that took it and how that run ended."""

    session_key: str
    message_seq: int
    # The message's fate in the session (started, dropped, failed...).
    fate: str
    run_id: str | None = None
    # The run's ExecutionResult fields a schedule's reader wants; None when no run took it.
    status: str | None = None
    termination_reason: str | None = None
    source: str | None = None
    reply: str = ""
    note: str = ""
