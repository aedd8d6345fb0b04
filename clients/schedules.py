"""Scheduled runs on Temporal Schedules (issue 12): create, list, describe, pause, unpause,
trigger and delete the schedules that send a message to a session at set times.

Each schedule's action starts a `ScheduledMessageWorkflow` per firing on the deployment's
workflow task queue (`workflows/scheduled_message.py`): it sends the message as a chat message
marked `cron` and lasts as long as the run that takes it, so the overlap policy (skip by default)
keeps at most one cron run of a schedule going. Temporal does the timing, catch-up after an
outage (`--catchup-window`, default 10 minutes), pausing and counting; nothing here keeps time.

The schedule's memo holds its session key, its timing as typed and its task queue, never a
secret; the message itself is the action's argument (like any chat message, in history).
`AgentlaneClient` exposes these as methods; the CLI's `agentlane schedule ...` calls those.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleIntervalSpec,
    ScheduleListActionStartWorkflow,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from agentlane.ids import InvalidSessionKey, check_session_key
from agentlane.messages import InboundMessage, check_inbound
from agentlane.scheduled_runs import (
    SCHEDULED_MESSAGE_WORKFLOW,
    InvalidScheduleId,
    ScheduledMessage,
    ScheduledRunOutcome,
    check_schedule_id,
    firing_workflow_id,
)
from agentlane.subagents import subagent_key_refusal
from clients.schedule_spec import (
    ScheduleSpecError,
    format_duration,
    overlap_name,
    parse_catchup_window,
    parse_overlap,
    parse_timing,
)
from workflows.scheduled_message import ScheduledMessageWorkflow

MEMO_SESSION = "agentlane_session"
MEMO_TIMING = "agentlane_timing"
MEMO_NOTE = "agentlane_note"
MEMO_TASK_QUEUE = "agentlane_task_queue"


# How often, and how far apart, a new schedule without a next firing is described again.
NEVER_FIRES_CHECKS = 3
NEVER_FIRES_PAUSE_S = 0.5


class ScheduleRejected(ValueError):
    """The schedule cannot be made or changed as asked (bad timing, id taken, bad message...)."""


class ScheduleNotFound(LookupError):
    """No schedule with that id exists (never made, or deleted)."""


class FiringView(BaseModel):
    """One recent firing: when, its workflow, and what became of its message once known."""

    scheduled_at: datetime
    started_at: datetime
    workflow_id: str
    # running, completed, failed... (the firing workflow's status); None when not looked up.
    state: str | None = None
    outcome: ScheduledRunOutcome | None = None


class ScheduleView(BaseModel):
    id: str
    session_key: str
    message: str
    timing: str
    overlap: str
    catchup_window: str
    paused: bool
    note: str | None = None
    created_at: datetime
    next_firings: list[datetime]
    # Temporal's counters: firings started, skipped because one was still running, and missed
    # because the server was down past the catch-up window.
    firings: int
    skipped_overlap: int
    missed_catchup: int
    running: list[str]
    recent: list[FiringView]


class ScheduleSummary(BaseModel):
    id: str
    session_key: str
    timing: str
    paused: bool
    note: str | None = None
    next_firing: datetime | None = None
    last_firing: datetime | None = None


async def create_schedule(
    client: Client,
    task_queue: str,
    schedule_id: str,
    session_key: str,
    text: str,
    *,
    cron: str | None = None,
    every: str | None = None,
    overlap: str = "skip",
    catchup_window: str | timedelta | None = None,
    paused: bool = False,
    note: str | None = None,
    workspace: str | None = None,
    model: str | None = None,
    workspace_host: str | None = None,
) -> ScheduleView:
    try:
        sid = check_schedule_id(schedule_id)
        key = check_session_key(session_key)
        refused = subagent_key_refusal(key)
        if refused is not None:
            raise ScheduleRejected(refused)
        check_inbound(InboundMessage(text=text))
        timing = parse_timing(cron, every)
        policy = SchedulePolicy(
            overlap=parse_overlap(overlap), catchup_window=parse_catchup_window(catchup_window)
        )
    except (InvalidScheduleId, InvalidSessionKey, ScheduleSpecError, ValueError) as err:
        raise ScheduleRejected(str(err)) from err
    preview = " ".join(text.split())[:60]
    action = ScheduleActionStartWorkflow(
        ScheduledMessageWorkflow.run,
        ScheduledMessage(
            schedule_id=sid,
            session_key=key,
            text=text,
            workspace=workspace,
            model=model,
            workspace_host=workspace_host,
        ),
        id=firing_workflow_id(sid),
        task_queue=task_queue,
        static_summary=f"schedule **{sid}** ({timing.text}) to session **{key}**: {preview}",
    )
    spec = (
        ScheduleSpec(cron_expressions=[timing.cron])
        if timing.cron is not None
        else ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timing.every or timedelta())])
    )
    schedule = Schedule(
        action=action,
        spec=spec,
        policy=policy,
        state=ScheduleState(note=note or _default_note(paused), paused=paused),
    )
    try:
        handle = await client.create_schedule(
            sid,
            schedule,
            memo={
                MEMO_SESSION: key,
                MEMO_TIMING: timing.text,
                MEMO_TASK_QUEUE: task_queue,
                # Temporal's pause and unpause replace the schedule's note: the creator's is
                # kept here, and an unpause without a note of its own puts it back.
                **({MEMO_NOTE: note} if note else {}),
            },
        )
    except ScheduleAlreadyRunningError:
        raise ScheduleRejected(
            f"schedule {sid} already exists; delete it first or choose another id"
        ) from None
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise ScheduleRejected(f"the server refused schedule {sid}: {err.message}") from err
        raise
    view = await describe_schedule(client, handle.id, outcomes=False)
    for _ in range(NEVER_FIRES_CHECKS):
        if view.next_firings:
            return view
        # The schedule's first times may not be worked out yet: ask again before concluding.
        await asyncio.sleep(NEVER_FIRES_PAUSE_S)
        view = await describe_schedule(client, handle.id, outcomes=False)
    if view.next_firings:
        return view
    # A timing Temporal finds no time for (`0 0 30 2 *`: 30 February) would sit there silently.
    await handle.delete()
    raise ScheduleRejected(
        f"schedule {sid} would never fire: Temporal finds no time matching {timing.text} "
        "(a date that does not exist, or an interval beyond its horizon); nothing was created"
    )


def _default_note(paused: bool) -> str:
    return "created paused" if paused else ""


async def describe_schedule(
    client: Client, schedule_id: str, *, outcomes: bool = True
) -> ScheduleView:
    """The schedule as the server holds it; with `outcomes`, what each recent firing's message
    became (its run id, status and source), read from the firing workflows."""
    desc = await _describe(client, schedule_id)
    action = desc.schedule.action
    if not isinstance(action, ScheduleActionStartWorkflow) or action.workflow != (
        SCHEDULED_MESSAGE_WORKFLOW
    ):
        raise ScheduleNotFound(f"schedule {schedule_id} is not an agentlane schedule")
    [message] = await client.data_converter.decode(list(action.args), [ScheduledMessage])
    memo = await desc.memo()
    info = desc.info
    recent = [
        FiringView(
            scheduled_at=r.scheduled_at,
            started_at=r.started_at,
            workflow_id=getattr(r.action, "workflow_id", ""),
        )
        for r in info.recent_actions
    ]
    if outcomes:
        recent = [await _with_outcome(client, firing) for firing in recent]
    window = desc.schedule.policy.catchup_window
    return ScheduleView(
        id=desc.id,
        session_key=message.session_key,
        message=message.text,
        timing=str(memo.get(MEMO_TIMING, "")),
        overlap=overlap_name(desc.schedule.policy.overlap),
        catchup_window=format_duration(window) if window is not None else "server default",
        paused=desc.schedule.state.paused,
        note=desc.schedule.state.note,
        created_at=info.created_at,
        # A paused schedule keeps the times it had when paused; only those still ahead count.
        next_firings=[t for t in info.next_action_times if t > datetime.now(UTC)],
        firings=info.num_actions,
        skipped_overlap=info.num_actions_skipped_overlap,
        missed_catchup=info.num_actions_missed_catchup_window,
        running=[getattr(r, "workflow_id", "") for r in info.running_actions],
        recent=recent,
    )


async def _with_outcome(client: Client, firing: FiringView) -> FiringView:
    handle = client.get_workflow_handle(firing.workflow_id, result_type=ScheduledRunOutcome)
    try:
        described = await handle.describe()
    except RPCError:
        return firing  # past retention
    status = described.status
    state = status.name.lower() if status is not None else None
    outcome: ScheduledRunOutcome | None = None
    if status == WorkflowExecutionStatus.COMPLETED:
        try:
            outcome = await handle.result()
        except Exception:
            outcome = None  # undecodable (encrypted with a key this client lacks)
    return firing.model_copy(update={"state": state, "outcome": outcome})


async def _describe(client: Client, schedule_id: str) -> ScheduleDescription:
    try:
        return await client.get_schedule_handle(check_schedule_id(schedule_id)).describe()
    except InvalidScheduleId as err:
        raise ScheduleRejected(str(err)) from err
    except RPCError as err:
        raise _not_found_or(err, schedule_id) from err


def _not_found_or(err: RPCError, schedule_id: str) -> Exception:
    if err.status == RPCStatusCode.NOT_FOUND:
        return ScheduleNotFound(
            f"schedule {schedule_id} does not exist; `agentlane schedule list` shows those that do"
        )
    return err


async def list_schedules(client: Client, task_queue: str) -> list[ScheduleSummary]:
    """This deployment's schedules (those whose firings run on its task queue). The server's
    list is eventually consistent: one made a moment ago can be missing for a second."""
    rows: list[ScheduleSummary] = []
    async for entry in await client.list_schedules():
        listed = entry.schedule
        if listed is None or not isinstance(listed.action, ScheduleListActionStartWorkflow):
            continue
        if listed.action.workflow != SCHEDULED_MESSAGE_WORKFLOW:
            continue
        memo: dict[str, Any] = dict(await entry.memo())
        if memo.get(MEMO_TASK_QUEUE) != task_queue:
            continue
        info = entry.info
        rows.append(
            ScheduleSummary(
                id=entry.id,
                session_key=str(memo.get(MEMO_SESSION, "")),
                timing=str(memo.get(MEMO_TIMING, "")),
                paused=listed.state.paused,
                note=listed.state.note,
                next_firing=info.next_action_times[0] if info and info.next_action_times else None,
                last_firing=info.recent_actions[-1].started_at
                if info and info.recent_actions
                else None,
            )
        )
    return sorted(rows, key=lambda r: r.id)


async def pause_schedule(client: Client, schedule_id: str, note: str | None = None) -> None:
    await _act(client, schedule_id, "pause", note or "paused")


async def unpause_schedule(client: Client, schedule_id: str, note: str | None = None) -> None:
    if note is None:
        try:
            handle = client.get_schedule_handle(check_schedule_id(schedule_id))
            memo = await (await handle.describe()).memo()
            kept = memo.get(MEMO_NOTE)
            note = kept if isinstance(kept, str) and kept else None
        except (InvalidScheduleId, RPCError):
            pass  # `_act` says what is wrong with the id or the schedule
    await _act(client, schedule_id, "unpause", note or "unpaused")


async def trigger_schedule(client: Client, schedule_id: str) -> None:
    """Fire now, under the schedule's overlap policy (with skip: not while a firing runs)."""
    await _act(client, schedule_id, "trigger")


async def delete_schedule(client: Client, schedule_id: str) -> None:
    """Stop the schedule for good; a firing in progress finishes its run."""
    await _act(client, schedule_id, "delete")


async def _act(client: Client, schedule_id: str, what: str, note: str | None = None) -> None:
    try:
        handle = client.get_schedule_handle(check_schedule_id(schedule_id))
    except InvalidScheduleId as err:
        raise ScheduleRejected(str(err)) from err
    try:
        if what == "pause":
            await handle.pause(note=note)
        elif what == "unpause":
            await handle.unpause(note=note)
        elif what == "trigger":
            await handle.trigger()
        else:
            await handle.delete()
    except RPCError as err:
        raise _not_found_or(err, schedule_id) from err
