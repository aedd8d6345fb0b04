"""Sub-agents as child workflows (SPEC §13.4): the `sessions_spawn` calls of one turn.

The run loop hands this module the turn's consecutive `sessions_spawn` calls. Each is read from
the transcript (`spawn_read`), put to the spawn gate (`workflows/policy/spawn_gate.py`), and, if
allowed, runs as a child `AgentRunWorkflow` of this run in its own session
`agent:<target>:subagent:<uuid>`; its final reply becomes the call's result (`spawn_record`).
Calls of one turn run at once (the spawn gate's `max_children_per_agent` bounds them).

The original's sub-agent lane (SPEC §2: at most `subagents.maxConcurrent`, 8, sub-agent runs at
once, not a per-parent gate) is a task queue here, as the global lane is: a sub-agent's model
calls go to `<queue>-subagent-model`, which each worker polls with
`AGENTLANE_MAX_SUBAGENT_MODEL_CALLS` (8) slots. So the limit is per worker and durable (calls
beyond it wait in Temporal's queue, survive any crash, and nothing is held that a dead run would
have to give back), and a fan-out never takes the slots of the sessions' own runs. A sub-agent
waiting on a tool or on its own children holds no slot, as no run does while it waits.

Durability is Temporal's: a child is a workflow like any run (a killed worker changes nothing),
and it is started with `REQUEST_CANCEL` as its parent-close policy and cancelled with the loop,
so aborting the parent aborts every child. The child's tokens and cost are added to the parent's
run, and so to the parent's session.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.common import TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from agentlane import search_attributes as sa
    from agentlane.entry_source import EntrySource
    from agentlane.event_stream import EventsInput
    from agentlane.ids import events_workflow_id, run_workflow_id
    from agentlane.model_calls import ToolCallRef
    from agentlane.run import (
        ExecutionRequest,
        ExecutionResult,
        ExecutionStatus,
        RunInput,
        UserTurn,
    )
    from agentlane.run_outcome import result_of_failure
    from agentlane.search_attribute_values import typed
    from agentlane.settings import model_task_queue, subagent_model_task_queue
    from agentlane.static_details import run_details
    from agentlane.subagents import (
        SPAWN_READ,
        SPAWN_RECORD,
        SpawnArgsRead,
        SpawnReadInput,
        SpawnRecordInput,
        SubagentSettings,
        subagent_key,
    )
    from agentlane.ui_text import plain
    from agentlane.usage import RunUsage
    from workflows import activity_options as opts
    from workflows.patches import (
        ABORT_TELLS_SUBAGENTS_PATCH,
        EVENTS_CODE,
        RUN_CODE,
        SPAWN_PINS_PATCH,
        STOP_ON_HOST_PATCH,
        SUBAGENT_ATTRIBUTES_PATCH,
        newest,
    )
    from workflows.policy.run_details import step
    from workflows.policy.search_attributes import identity
    from workflows.policy.spawn_gate import (
        child_tools,
        denied_tool_refusals,
        depth_of,
        refusal_summary,
        spawn_refusal,
    )
    from workflows.policy.tool_policy import ToolSelection
    from workflows.process_stop import stop_background_processes
    from workflows.session_events import SessionEventsWorkflow

if TYPE_CHECKING:
    from workflows.agent_run import AgentRunWorkflow

# Runs recorded before sub-agents never called `sessions_spawn`; the marker keeps the branch
# out of their replay all the same.
SUBAGENTS_PATCH = "subagents-as-child-workflows"
SPAWN_STEP_TIMEOUT = timedelta(seconds=30)
# Sub-agent runs recorded before the sub-agent lane called the model on the global lane's queue.
SUBAGENT_LANE_PATCH = "subagent-model-lane"


class Subagents:
    def __init__(self, run: AgentRunWorkflow) -> None:
        self.run = run
        self.active = 0
        # The run ids of the children running now, in the order they started.
        self.running: list[str] = []
        # Whether this sub-agent run's model calls go to the sub-agent lane; None until asked.
        self.in_lane: bool | None = None

    @property
    def settings(self) -> SubagentSettings:
        return self.run.req.subagents or SubagentSettings()

    @property
    def depth(self) -> int:
        return depth_of(self.run.req.session_key, self.run.req.spawn_depth)

    def with_inherited_refusals(self, selection: ToolSelection) -> ToolSelection:
        """A sub-agent calling a tool its parent could not use, or its depth took away, is
        told so (SPEC §13.4), in the spawn gate's words for `sessions_spawn`."""
        if self.depth <= 0:
            return selection
        refusals = {
            **denied_tool_refusals(self.depth, self.settings),
            **self.run.req.tool_refusals,
        }
        added = {
            name: text
            for name, text in refusals.items()
            if name not in selection.offered and name not in selection.refusals
        }
        if not added:
            return selection
        return selection.model_copy(update={"refusals": {**selection.refusals, **added}})

    def model_queue(self) -> str:
        """The task queue of this run's model calls: the sub-agent lane's for a sub-agent."""
        base = workflow.info().task_queue
        if self.run.req.spawned_by is None:
            return model_task_queue(base)
        if self.in_lane is None:
            self.in_lane = self.run.patches(SUBAGENT_LANE_PATCH)
        return subagent_model_task_queue(base) if self.in_lane else model_task_queue(base)

    async def run_calls(self, turn: int, entry_id: str, calls: list[ToolCallRef]) -> None:
        """Run one turn's `sessions_spawn` calls; each ends with its result in the transcript."""
        reads = await asyncio.gather(*(self._read(turn, entry_id, c) for c in calls))
        work = []
        for call, args in zip(calls, reads, strict=True):
            if args.error:
                work.append(self._record(turn, entry_id, call.id, args.error, True, "invalid"))
                continue
            refusal = spawn_refusal(
                caller_depth=self.depth,
                active_children=self.active,
                requester_agent=self.run.req.agent_id,
                target_agent=args.agent_id,
                settings=self.settings,
            )
            if refusal is not None:
                summary = refusal_summary(
                    caller_depth=self.depth, active_children=self.active, settings=self.settings
                )
                work.append(
                    self._record(turn, entry_id, call.id, f"Error: {refusal}", True, summary)
                )
                continue
            self.active += 1
            work.append(self._child(turn, entry_id, call, args))
        if self.active:
            # On the run's page in the Temporal UI (no history event).
            self.run.tell(
                step(turn, f"waiting for {self.active} sub-agent(s) (its child workflows)")
            )
        await asyncio.gather(*work)

    async def _read(self, turn: int, entry_id: str, call: ToolCallRef) -> SpawnArgsRead:
        req, c = self.run.req, self.run.c
        pins = c.workspace_host is None and self.run.patches(SPAWN_PINS_PATCH)
        read: SpawnArgsRead = await workflow.execute_activity(
            SPAWN_READ,
            SpawnReadInput(
                session_key=req.session_key,
                run_id=req.run_id,
                turn_index=turn,
                assistant_entry_id=entry_id,
                tool_call_id=call.id,
                workspace=req.workspace if pins else "",
                create_workspace=pins and req.create_workspace,
            ),
            result_type=SpawnArgsRead,
            start_to_close_timeout=SPAWN_STEP_TIMEOUT,
            retry_policy=opts.TOOL_RETRY,
            summary=f"spawn: {call.summary}" if call.summary else "spawn: read task",
        )
        if read.host is not None and c.workspace_host is None:
            # The workspace is made there now: the parent and every child work on that host
            # (children pinning themselves made it on several, the parent finding none of it).
            c.workspace_host = read.host
        return read

    async def _record(
        self,
        turn: int,
        entry_id: str,
        call_id: str,
        text: str,
        is_error: bool,
        summary: str,
        child_key: str = "",
    ) -> None:
        await workflow.execute_activity(
            SPAWN_RECORD,
            SpawnRecordInput(
                session_key=self.run.req.session_key,
                run_id=self.run.req.run_id,
                turn_index=turn,
                assistant_entry_id=entry_id,
                tool_call_id=call_id,
                child_session_key=child_key,
                text=text,
                is_error=is_error,
                summary=summary,
            ),
            start_to_close_timeout=SPAWN_STEP_TIMEOUT,
            retry_policy=opts.TOOL_RETRY,
            summary=f"spawn result: {summary}"[:200],
        )

    def _child_request(self, args: SpawnArgsRead) -> ExecutionRequest:
        req = self.run.req
        target = args.agent_id or req.agent_id
        # Within what this run may use now (its policy's channel, group, owner-only and
        # provider layers): a child never has a tool its requester was denied.
        depth = self.depth + 1
        parent = self.run.tools()
        tools = child_tools(parent.offered, depth, self.settings)
        refusals = {**req.tool_refusals, **parent.refusals}
        key = subagent_key(target, str(workflow.uuid4()))
        run_id = run_workflow_id(key, 1)
        return ExecutionRequest(
            session_key=key,
            run_id=run_id,
            run_number=1,
            agent_id=target,
            source=EntrySource.SUBAGENT,
            prompt=[UserTurn(entry_id=f"{run_id}:task", text=args.task)],
            workspace=req.workspace,
            model=req.model,
            thinking=req.thinking,
            reasoning_mode=req.reasoning_mode,
            budget_seconds=req.budget_seconds,
            idle_timeout_seconds=req.idle_timeout_seconds,
            tools=tools,
            tool_refusals={n: text for n, text in refusals.items() if n not in tools},
            subagents=req.subagents,
            spawn_depth=depth,
            spawned_by=req.run_id,
            loop_detection=req.loop_detection,
            approvals=req.approvals,
            # Its approvals are decided in the top-level session (workflows/approval_wait.py).
            root_session_key=req.root_session_key or req.session_key,
            root_run_id=req.root_run_id or req.run_id,
            max_turns=req.max_turns,
            context_window=req.context_window,
            context_window_source=req.context_window_source,
            max_wait_seconds=req.max_wait_seconds,
            continue_as_new_after_events=req.continue_as_new_after_events,
            counters_upsert_seconds=req.counters_upsert_seconds,
            # The child works in its parent's workspace, so on the same host.
            workspace_host=self.run.c.workspace_host or req.workspace_host,
            # A default workspace not made yet (the parent's first tool call is this spawn):
            # the child's first tool call makes it. It failed "workspace ... does not exist".
            create_workspace=req.create_workspace and self.run.c.workspace_host is None,
            host_wait_seconds=req.host_wait_seconds,
        )

    async def _child(
        self, turn: int, entry_id: str, call: ToolCallRef, args: SpawnArgsRead
    ) -> None:
        request = self._child_request(args)
        name = args.label or " ".join(args.task.split())[:60]
        key = request.session_key
        # The sub-agent's events go to its own stream, as a session's do (watchers and the
        # gateway follow it by its key); the stream closes when the child ends.
        await workflow.start_child_workflow(
            SessionEventsWorkflow.run,
            EventsInput(session_key=key, code=newest(EVENTS_CODE)),
            id=events_workflow_id(key),
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=f"event stream of sub-agent session {key}",
            search_attributes=typed({sa.SESSION_KEY.name: key}),
        )
        ended: ChildWorkflowError | None = None
        self.running.append(request.run_id)
        try:
            result = await self._child_result(request, name)
        except ChildWorkflowError as err:
            ended = err
        finally:
            self.active -= 1
            self.running.remove(request.run_id)
            stream = workflow.get_external_workflow_handle(events_workflow_id(key))
            await asyncio.shield(asyncio.ensure_future(stream.signal(SessionEventsWorkflow.close)))
        # Nobody can poll what the sub-agent left running in the background any more.
        host = self.run.c.workspace_host or self.run.req.workspace_host
        on_host = host if host is not None and self.run.patches(STOP_ON_HOST_PATCH) else None
        await stop_background_processes(key, self.run.patches.own_marker, on_host)
        if ended is not None:
            # Terminated, timed out or failed outside the run's own code (a run returns its own
            # errors as a result): the call's error result says so and the parent goes on. What
            # the child spent is in its own history; no result brought it here.
            cause = str(ended.cause or ended)
            await self._record(
                turn,
                entry_id,
                call.id,
                f"Error: the sub-agent {key} ended abnormally ({cause}); it gave no reply",
                True,
                f"{name}: {cause}"[:120],
                key,
            )
            return
        self._roll_up(result.usage)
        if result.status == ExecutionStatus.SUCCESS:
            text = result.reply or "(the sub-agent ended without a reply)"
            await self._record(
                turn, entry_id, call.id, text, False, f"{name}: done", request.session_key
            )
            return
        why = result.error.message if result.error else result.termination_reason.value
        await self._record(
            turn,
            entry_id,
            call.id,
            f"Error: the sub-agent {request.session_key} ended {result.status.value}: {why}",
            True,
            f"{name}: {result.status.value}",
            request.session_key,
        )

    async def tell_stop(self, reason: str, by: str | None) -> None:
        """Before its children are cancelled with it: each is told why its parent stopped and
        who asked, as an abort of its own, so it fails naming them (and tells its own)."""
        if not self.running or not self.run.patches(ABORT_TELLS_SUBAGENTS_PATCH):
            return
        why = f"its parent run {self.run.req.run_id} stopped: {reason}"

        async def tell(run_id: str) -> None:
            try:
                await workflow.get_external_workflow_handle(run_id).signal("abort", args=[why, by])
            except Exception:  # noqa: BLE001 - it ended meanwhile: the cancel is moot too
                pass

        await asyncio.gather(*(tell(run_id) for run_id in list(self.running)))

    async def _child_result(self, request: ExecutionRequest, name: str) -> ExecutionResult:
        """The child's result: what it returned, or what it failed with when it ended in error
        or was aborted (agentlane/run_outcome.py)."""
        try:
            result: ExecutionResult = await workflow.execute_child_workflow(
                "AgentRunWorkflow",
                RunInput(request=request, code=newest(RUN_CODE)),
                id=request.run_id,
                result_type=ExecutionResult,
                execution_timeout=timedelta(seconds=request.budget_seconds + 3600),
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=(
                    f"sub-agent (depth {request.spawn_depth}) of {self.run.req.session_key}: "
                    f"{plain(name, 60)}"
                ),
                static_details=run_details(request),
                search_attributes=self._child_attributes(request),
            )
        except ChildWorkflowError as err:
            failed = result_of_failure(err)
            if failed is None:
                raise
            return failed
        return result

    def _child_attributes(self, request: ExecutionRequest) -> TypedSearchAttributes | None:
        """Who and what, as a session's runs start with: the UI finds a sub-agent's run by its
        key, agent, model and source (runs recorded before started with none)."""
        if not self.run.patches(SUBAGENT_ATTRIBUTES_PATCH):
            return None
        who = identity(
            request.session_key,
            request.agent_id,
            request.model.label(),
            None,
            **{sa.SOURCE.name: EntrySource.SUBAGENT.value},
        )
        return typed(who)

    def _roll_up(self, child: RunUsage) -> None:
        """The child's tokens and cost count in the parent's run (its context does not: the
        parent's last call stays the figure for its own window)."""
        self.run.c.usage = self.run.c.usage.spend(child.accumulated)
