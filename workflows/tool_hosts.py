"""Tool calls on the host that has the workspace (issue 20; decisions in
workflows/policy/host_routing.py).

Deterministic code only. The run loop calls `ToolHosts.run` for each tool call: it runs the
call where the session's workspace is and, when that host is gone, waits for it (status
`waiting`, reason `host <id> unavailable`, AgentPhase=waiting) until it is back, an abort ends
the wait, or the bound is reached.

read, write and edit are first tried as local activities on the worker that holds the workflow
(the short-step path): the activity itself checks its host and answers `wrong_host` without
touching anything when it is not the session's, and only then does the call go to the host's
queue. Local activity results are recorded as markers, so replay takes the same path.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, TimeoutType
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agentlane.announcements import PUBLISH_ANNOUNCEMENTS, PublishInput
    from agentlane.errors import ExecutionErrorKind
    from agentlane.events import Announcement, EventKind
    from agentlane.run import ExecutionError, ExecutionRequest, RunCarry, TerminationReason
    from agentlane.session import RunPhase
    from agentlane.settings import host_task_queue
    from agentlane.tool_calls import ToolCallInput, ToolCallOutcome, tool_activity_name
    from workflows import activity_options as opts
    from workflows.loop_end import LoopEnd
    from workflows.patches import Patches
    from workflows.policy import host_routing

# Runs recorded before tools were routed to their workspace's host never pinned a host.
HOST_ROUTING_PATCH = "tools-on-workspace-host"


class ToolRunner(Protocol):
    """What this needs of the run workflow."""

    req: ExecutionRequest
    c: RunCarry
    phase: RunPhase
    waiting_until: float | None
    waiting_reason: str | None
    patches: Patches

    def show(self, text: str) -> None: ...

    def next_warning(self) -> int: ...


def _no_worker_in_time(err: ActivityError) -> bool:
    """The call waited in its queue past its schedule-to-start timeout: no worker took it."""
    cause = err.cause
    return isinstance(cause, ActivityTimeout) and cause.type == TimeoutType.SCHEDULE_TO_START


class ToolHosts:
    def __init__(self, run: ToolRunner) -> None:
        self.h = run
        # Whether a tool call of this run segment has reached the workspace's host: the first
        # one makes the session's default workspace there.
        self.reached = False

    def input_for(self, inp: ToolCallInput) -> ToolCallInput:
        """The call's input with the host it must run on, if the session has one."""
        return inp.model_copy(
            update={
                "host": self.h.c.workspace_host,
                "create_workspace": self.h.req.create_workspace and not self.reached,
            }
        )

    async def run(self, name: str, inp: ToolCallInput, summary: str) -> ToolCallOutcome | LoopEnd:
        """Run one tool call where its workspace is. Raises ActivityError as the activity does
        (the caller turns it into the run's end); an abort cancels the wait with the call."""
        inp = self.input_for(inp)
        if name in opts.LOCAL_TOOLS and self.h.patches(opts.LOCAL_ACTIVITIES_PATCH):
            outcome = await self._local(name, inp, summary)
            if not outcome.wrong_host:
                return self._ran(outcome)
        host = self.h.c.workspace_host
        if host is None:
            # No host yet (or shared workspaces): any worker, which names its host.
            outcome = await self._remote(name, inp, summary, None, None)
            if outcome.wrong_host and outcome.host is not None:
                # An earlier attempt started on another host (its worker died): the call, and
                # the session's workspace, are that host's (activities/tool_calls.py).
                host = outcome.host
                if self.h.patches(HOST_ROUTING_PATCH):
                    self.h.c.workspace_host = host  # pinned now: a wait for it says so
                routed = inp.model_copy(update={"host": host})
                ran = await self._on_host(host, name, routed, summary)
                return ran if isinstance(ran, LoopEnd) else self._ran(ran)
            return self._ran(outcome)
        ran = await self._on_host(host, name, inp, summary)
        return ran if isinstance(ran, LoopEnd) else self._ran(ran)

    def _ran(self, outcome: ToolCallOutcome) -> ToolCallOutcome:
        self.reached = True
        c = self.h.c
        pinned = host_routing.pin_after(c.workspace_host, outcome.host)
        if pinned != c.workspace_host and self.h.patches(HOST_ROUTING_PATCH):
            c.workspace_host = pinned
            workflow.logger.info("session %s: workspace on host %s", self.h.req.session_key, pinned)
        return outcome

    async def _local(self, name: str, inp: ToolCallInput, summary: str) -> ToolCallOutcome:
        outcome: ToolCallOutcome = await workflow.execute_local_activity(
            tool_activity_name(name),
            inp,
            result_type=ToolCallOutcome,
            start_to_close_timeout=opts.LOCAL_TOOL_START_TO_CLOSE,
            retry_policy=opts.TOOL_RETRY,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=summary,
        )
        return outcome

    async def _remote(
        self,
        name: str,
        inp: ToolCallInput,
        summary: str,
        host: str | None,
        schedule_to_start: float | None,
    ) -> ToolCallOutcome:
        outcome: ToolCallOutcome = await workflow.execute_activity(
            tool_activity_name(name),
            inp,
            result_type=ToolCallOutcome,
            task_queue=(
                host_task_queue(workflow.info().task_queue, host) if host is not None else None
            ),
            schedule_to_start_timeout=(
                timedelta(seconds=schedule_to_start) if schedule_to_start is not None else None
            ),
            start_to_close_timeout=opts.tool_start_to_close(name),
            heartbeat_timeout=opts.tool_heartbeat_timeout(name),
            retry_policy=opts.TOOL_RETRY,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            summary=summary,
        )
        return outcome

    async def _on_host(
        self, host: str, name: str, inp: ToolCallInput, summary: str
    ) -> ToolCallOutcome | LoopEnd:
        """On the host's own queue; a call no worker of the host takes in time means the host is
        gone: wait for it (each attempt is the wait), up to the run's bound."""
        c, bound = self.h.c, float(self.h.req.host_wait_seconds)
        waiting = False
        try:
            while True:
                timeout = host_routing.attempt_timeout(c.host_waited_seconds, bound)
                scheduled = workflow.time()
                try:
                    outcome = await self._remote(name, inp, summary, host, timeout)
                except ActivityError as err:
                    if not _no_worker_in_time(err):
                        raise
                    elapsed = max(timeout, workflow.time() - scheduled)
                    verdict = host_routing.after_absence(
                        host, c.host_waited_seconds, elapsed, bound
                    )
                    c.host_waited_seconds = verdict.waited
                    if not verdict.wait:
                        return LoopEnd(
                            TerminationReason.ERROR,
                            ExecutionError(
                                kind=ExecutionErrorKind.RUNTIME_UNAVAILABLE,
                                message=verdict.message,
                            ),
                            unanswered=verdict.message,
                        )
                    if not waiting:
                        waiting = True
                        await self._announce_wait(verdict)
                    continue
                if outcome.wrong_host:
                    # A worker on the host's queue that is not the host: a misconfiguration
                    # (two host ids for one queue); never run the tool elsewhere.
                    return LoopEnd(
                        TerminationReason.ERROR,
                        ExecutionError(
                            kind=ExecutionErrorKind.RUNTIME_UNAVAILABLE,
                            message=f"a worker of host {outcome.host} took a tool call meant "
                            f"for host {host}; check the workers' --host-id",
                        ),
                    )
                return outcome
        finally:
            if waiting:
                h = self.h
                h.phase, h.waiting_until, h.waiting_reason = RunPhase.TOOLS, None, None
                h.show(f"no longer waiting for host {host}")

    async def _announce_wait(self, verdict: host_routing.HostWait) -> None:
        """Status `waiting` with its reason (the query, the run's page, AgentPhase=waiting) and
        a warning on the event stream, published from the worker holding the workflow (the
        next activity, the tool call, waits for the missing host)."""
        h = self.h
        now = workflow.time()
        until = now + float(h.req.host_wait_seconds) - verdict.waited
        h.phase = RunPhase.WAITING
        h.waiting_until = until
        h.waiting_reason = host_routing.unavailable_reason(verdict.host)
        h.show(verdict.message)
        await workflow.execute_local_activity(
            PUBLISH_ANNOUNCEMENTS,
            PublishInput(
                session_key=h.req.session_key,
                run_id=h.req.run_id,
                announce=[
                    Announcement(
                        kind=EventKind.WARNING,
                        ts=now,
                        text=verdict.message,
                        data={
                            "code": "waiting_for_host",
                            "host": verdict.host,
                            "until": until,
                            "n": h.next_warning(),
                        },
                    )
                ],
            ),
            start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
            summary=f"announce the wait for host {verdict.host}",
        )
