"""Background processes stop with their session's context (issue 21): on a reset and on close.

A session's background processes (the `process` tool) live in the worker processes that started
them. When the session is reset or closed, the session workflow asks which workers hold its
running processes (`list_process_owners`, a local activity reading the process records), then
has each of them stop the session's processes (`stop_session_processes`, on that worker's own
task queue). A worker that is gone has no processes left to stop.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

LIST_PROCESS_OWNERS = "list_process_owners"
STOP_SESSION_PROCESSES = "stop_session_processes"


class SessionProcesses(BaseModel):
    session_key: str


class ProcessOwners(BaseModel):
    """The task queues of the live workers holding the session's running processes."""

    queues: list[str] = Field(default_factory=list)


class ProcessesStopped(BaseModel):
    """What one worker stopped: the processes' ids."""

    stopped: list[str] = Field(default_factory=list)
