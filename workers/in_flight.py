"""What this worker process is running right now, so a shutdown cut short can say what it cut.

An activity interceptor notes each activity from its start to its end (type, workflow id,
attempt); `describe()` names them in one line for the log.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

# How many running activities the shutdown log line names (the rest are counted).
NAMED_IN_LOG = 20


class InFlight(Interceptor):
    def __init__(self) -> None:
        self._running: dict[int, str] = {}
        self._next = 0

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Tracked(next, self)

    def start(self, what: str) -> int:
        self._next += 1
        self._running[self._next] = what
        return self._next

    def end(self, token: int) -> None:
        self._running.pop(token, None)

    def describe(self) -> str:
        """e.g. "2 activities: tool_exec of run:abc (attempt 1), call_model of run:def (...)"."""
        names = sorted(self._running.values())
        if not names:
            return "no activities"
        shown = ", ".join(names[:NAMED_IN_LOG])
        more = f" and {len(names) - NAMED_IN_LOG} more" if len(names) > NAMED_IN_LOG else ""
        return f"{len(names)} activities: {shown}{more}"


class _Tracked(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, registry: InFlight) -> None:
        super().__init__(next)
        self._registry = registry

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        token = self._registry.start(
            f"{info.activity_type} of {info.workflow_id} (attempt {info.attempt})"
        )
        try:
            return await super().execute_activity(input)
        finally:
            self._registry.end(token)
