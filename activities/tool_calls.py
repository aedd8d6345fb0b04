"""Tool activities: one activity type per tool, so the Temporal UI names what ran.

A tool call's arguments are read from the assistant entry in the transcript store; the result is
appended there (exactly once per tool call id) and a short outcome goes back to the workflow.

At-least-once, said plainly (DESIGN decision 6): read is repeated freely; write is idempotent;
edit recognises an edit that already landed; exec is never silently re-run after a crash: a
marker written before the command starts tells a retried attempt that the command may have run,
and the model is told so instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.cancellation import cancelled_for_good
from activities.context.token_estimate import IMAGES_META_KEY
from activities.known_secrets import KnownSecrets
from activities.liveness import heartbeat_forever, heartbeats_reach_temporal
from activities.progress_details import ToolProgress
from activities.redacted_stream import RedactedStream
from activities.stream_publishers import EventLease, SessionPublishers
from activities.stream_republish import RUNS_SEEN, Republisher
from activities.tools.apply_patch import apply_patch, load_plan
from activities.tools.exec_tool import run_exec
from activities.tools.file_tools import edit_file, write_file
from activities.tools.process_tool import ProcessTool
from activities.tools.read_tool import read_file
from activities.tools.results import ToolResult, error_summary
from activities.tools.specs import (
    ApplyPatchArgs,
    EditArgs,
    ExecArgs,
    InvalidToolArguments,
    ProcessArgs,
    ReadArgs,
    WriteArgs,
    parse_args,
)
from activities.tools.tool_threads import in_tool_thread
from activities.tools.workspace import PathOutsideWorkspace, WorkspaceMissing, local_workspace
from activities.transcript_store import TranscriptStore, tool_result_entry
from agentlane.errors import TRANSCRIPT_CORRUPT, WORKSPACE_MISSING
from agentlane.events import AgentEvent, EventKind
from agentlane.private_files import make_private_dir
from agentlane.redaction import redact
from agentlane.tool_calls import ToolCallInput, ToolCallOutcome, tool_activity_name
from agentlane.tool_catalog import RUN_ONCE_TOOLS
from agentlane.tool_preview import tool_preview
from agentlane.tool_signatures import outcome_hash
from agentlane.transcript import ToolCall, TranscriptEntry

# The tool mark that holds the host a session's first call ran on (`_claim_host`).
HOST_CLAIM = "host"

log = logging.getLogger(__name__)

INTERRUPTED_EXEC = (
    "The command was interrupted (the worker running it stopped) and was not run again, because "
    "running it twice may not be safe. It may have partly or fully completed; check its effects "
    "before retrying."
)


# What the event stream (and so the events workflow's history) holds of a tool call: previews.
STREAM_OUTPUT_CHARS = 16_000
# How long the result of a command that ran is held for a store that cannot be reached, asked
# again every RECORD_RETRY_SECONDS (each ask may itself wait for a connection).
RECORD_WAIT_SECONDS = 600.0
RECORD_RETRY_SECONDS = 1.0
PREVIEW_ARG_CHARS = 2_000


# Redacted a little past where a text is cut, so that the cut never leaves half a secret.
_REDACT_MARGIN = 256


def stream_text(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, secret-shaped values redacted (agentlane/redaction.py):
    the stream's events land in the events workflow's history."""
    return redact(text[: limit + _REDACT_MARGIN])[:limit]


def preview_args(arguments: dict[str, Any]) -> dict[str, Any]:
    """Tool arguments for the stream: long strings (a file's content) cut to a preview that
    says how long they were, secret-shaped values redacted."""
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if isinstance(value, str) and len(value) > PREVIEW_ARG_CHARS:
            value = (
                f"{stream_text(value, PREVIEW_ARG_CHARS)}… "
                f"[{len(value) - PREVIEW_ARG_CHARS} more characters]"
            )
        elif isinstance(value, str):
            value = redact(value)
        out[name] = value
    return out


async def _heartbeat_forever(progress: ToolProgress) -> None:
    # The first at once (a dead worker is noticed from the start), with what the call does.
    activity.heartbeat(progress.details())
    await heartbeat_forever(details=progress.details)


class ToolActivities:
    def __init__(
        self,
        store: TranscriptStore,
        publishers: SessionPublishers,
        host: str | None = None,
        secrets: KnownSecrets | None = None,
        data_dir: Path | None = None,
    ) -> None:
        """`host`: this worker's host id when workspaces are per host (reported with every
        outcome, so the session pins its tools here); None: shared workspaces. `secrets`: the
        values redacted from what a call shows (its preview, its heartbeats) besides the shapes
        `agentlane/redaction.py` knows. `data_dir`: this worker's, where default workspaces
        are."""
        self.store = store
        self.publishers = publishers
        self.host = host
        self.secrets = secrets
        self.data_dir = data_dir

    def _here(self, inp: ToolCallInput) -> ToolCallInput:
        """`inp` with its workspace as a path on this worker's disk (`local_workspace`)."""
        local = local_workspace(inp.workspace, self.data_dir)
        return inp if local == inp.workspace else inp.model_copy(update={"workspace": local})

    async def _secrets(self) -> list[str]:
        return await self.secrets.values() if self.secrets is not None else []

    async def _preview(self, result: TranscriptEntry, call: ToolCall | None) -> str:
        """The bounded, redacted preview the outcome carries into history (what the Temporal
        UI shows of the call: `agentlane/tool_preview.py`)."""
        arguments: dict[str, Any] | str = {}
        if call is not None:
            arguments = call.raw_arguments if call.raw_arguments is not None else call.arguments
        return tool_preview(arguments, result.text, await self._secrets())

    def _check_host(self, inp: ToolCallInput) -> None:
        """Workspaces per host: the session's default workspace is made here on first use; a
        workspace it was given must be on this host's disk, or the run ends saying so (no tool
        may act on a folder that is not there)."""
        if self.host is None:
            return
        root = Path(inp.workspace)
        if inp.create_workspace:
            make_private_dir(root)  # a default workspace, under the data dir: its owner's only
        elif not root.is_dir():
            raise ApplicationError(
                f"workspace {inp.workspace} does not exist on host {self.host}; create it there "
                "or start the session with a folder on the host that runs its tools",
                type=WORKSPACE_MISSING,
                non_retryable=True,
            )

    @staticmethod
    def _workspace_here(inp: ToolCallInput) -> bool:
        """The common case of `_check_host` answered on the event loop: a workspace already
        made, on this host's own disk (one stat, no hop to a thread). A workspace still to be
        made, or not found, goes to `_check_host` on a thread, which makes it or says why not."""
        return not inp.create_workspace and os.path.isdir(inp.workspace)

    async def _mark(self, inp: ToolCallInput, kind: str, value: str) -> bool:
        """Note, in the store, what this attempt does, for a retried attempt on any host; False
        when an earlier attempt noted it already."""
        return await self.store.store.mark_tool_call(inp.session_key, inp.tool_call_id, kind, value)

    async def _claim_host(self, inp: ToolCallInput) -> str:
        assert self.host is not None
        if await self._mark(inp, HOST_CLAIM, self.host):
            return self.host
        return await self._mark_of(inp, HOST_CLAIM) or self.host

    async def _mark_of(self, inp: ToolCallInput, kind: str) -> str | None:
        return await self.store.store.tool_mark(inp.session_key, inp.tool_call_id, kind)

    async def _find_call(self, inp: ToolCallInput) -> ToolCall:
        # After `_run` checked the session for an answer: the call's own entry is read then.
        entry = await self.store.get(inp.session_key, inp.assistant_entry_id, recheck=False)
        if entry is not None:
            for call in entry.tool_calls:
                if call.id == inp.tool_call_id:
                    return call
        raise ApplicationError(
            f"tool call {inp.tool_call_id} not found in assistant entry {inp.assistant_entry_id}",
            type=TRANSCRIPT_CORRUPT,
            non_retryable=True,
        )

    def _event(self, inp: ToolCallInput, kind: EventKind, **fields: object) -> AgentEvent:
        return AgentEvent(
            kind=kind,
            event_id=f"{inp.tool_call_id}/{kind.value}",
            session_key=inp.session_key,
            run_id=inp.run_id,
            attempt=activity.info().attempt,
            turn_index=inp.turn_index,
            message_id=inp.assistant_entry_id,
            tool_call_id=inp.tool_call_id,
            tool_name=inp.tool_name,
            **fields,
        )

    async def _run(
        self,
        inp: ToolCallInput,
        execute: Callable[[ToolCall, EventLease], Awaitable[ToolResult]],
        progress: ToolProgress | None = None,
    ) -> ToolCallOutcome:
        """`progress`: what the heartbeats report; a tool that streams output feeds it."""
        started = time.monotonic()
        if inp.host is not None and self.host is not None and inp.host != self.host:
            # Meant for the host that has the files (a local attempt on the worker that holds
            # the workflow, which is on another host): touch nothing.
            return ToolCallOutcome(wrong_host=True, host=self.host)
        if inp.host is None and self.host is not None:
            # A session's first call, on any host: the first attempt to start claims the call
            # for its host before touching anything. A retry elsewhere (the first worker was
            # killed) touches nothing and names that host, where the workspace and whatever the
            # call did are (the run sends it there).
            claimed = await self._claim_host(inp)
            if claimed != self.host:
                return ToolCallOutcome(wrong_host=True, host=claimed)
        new_here = RUNS_SEEN.first_here(inp.run_id)
        in_stream: set[str] = set()
        if activity.info().attempt > 1 or new_here:
            # The previous attempt's (or step's) worker may have died with the run's events
            # unsent: they go out again before anything of this step.
            in_stream = await Republisher.for_step(
                self.store, self.publishers, activity.info().attempt
            ).republish(activity.client(), inp.session_key, inp.run_id)
            if heartbeats_reach_temporal():
                activity.heartbeat()
        existing = await self.store.tool_result(inp.session_key, inp.tool_call_id)
        if existing is not None:
            # A previous attempt (or the run's clean-up) already answered this call.
            try:
                answered: ToolCall | None = await self._find_call(inp)
            except ApplicationError:
                answered = None
            return ToolCallOutcome(
                is_error=existing.is_error,
                summary=redact(existing.meta.get("summary", "") or existing.text[:120]),
                duration_ms=0,
                replayed=True,
                outcome_hash=self._outcome_hash(inp, existing),
                host=self.host,
                preview=await self._preview(existing, answered),
            )
        if self.host is not None and not self._workspace_here(inp):
            await asyncio.to_thread(self._check_host, inp)
        call = await self._find_call(inp)
        async with self.publishers.lease(activity.client(), inp.session_key) as publisher:
            start = self._event(
                inp, EventKind.TOOL_EXECUTION_START, data={"input": preview_args(call.arguments)}
            )
            if start.event_id not in in_stream:  # a retry whose first attempt announced it
                publisher.publish(start)
            # Heartbeats let Temporal notice a dead worker within the heartbeat timeout and
            # deliver cancellation (abort) to a running tool.
            if progress is None:
                progress = ToolProgress(inp.tool_name)
            progress.secrets = await self._secrets()
            # A local activity has no heartbeat: its workflow task is its liveness.
            beats = (
                None
                if activity.info().is_local
                else asyncio.create_task(_heartbeat_forever(progress))
            )
            try:
                try:
                    result = await execute(call, publisher)
                except (InvalidToolArguments, PathOutsideWorkspace, WorkspaceMissing) as err:
                    result = ToolResult(f"Error: {err}", is_error=True, summary=str(err)[:120])
                except asyncio.CancelledError:
                    if not cancelled_for_good():
                        raise  # a retry follows and answers the call
                    result = ToolResult(
                        "Tool call was cancelled: the run was aborted.", True, "aborted"
                    )
                    await asyncio.shield(self._record(inp, result, started))
                    publisher.publish(
                        self._event(
                            inp, EventKind.TOOL_EXECUTION_END, success=False, summary="aborted"
                        ),
                        urgent=True,
                    )
                    raise
                except (OSError, UnicodeError, ValueError) as err:
                    result = ToolResult(f"Error: {err}", is_error=True, summary=str(err)[:120])
                duration_ms = int((time.monotonic() - started) * 1000)
                # Still heartbeating: a store that is down for a while (PostgreSQL restarting)
                # holds the record up, and an attempt timed out meanwhile would throw away the
                # result of a command that did finish. Shielded: a cancel that arrives now
                # still lets the result land, for the retry to find.
                written = await asyncio.shield(self._record_for_good(inp, result, started))
            finally:
                if beats is not None:
                    beats.cancel()
            publisher.publish(
                self._event(
                    inp,
                    EventKind.TOOL_EXECUTION_END,
                    success=not written.is_error,
                    summary=written.meta.get("summary", ""),
                    text=stream_text(written.text, 2000),
                    duration_ms=duration_ms,
                ),
            )
        preview = await self._preview(written, call)
        summary = redact(str(written.meta.get("summary", "")))[:200]
        return ToolCallOutcome(
            is_error=written.is_error,
            # Each step's result is in history: a summary the preview already shows (a path),
            # the host the run has pinned already and the duration (the events' times say it)
            # are not written twice.
            summary="" if summary in preview else summary,
            outcome_hash=self._outcome_hash(inp, written, call.arguments),
            host=None if inp.host == self.host else self.host,
            preview=preview,
        )

    @staticmethod
    def _outcome_hash(
        inp: ToolCallInput, result: TranscriptEntry, arguments: dict[str, Any] | None = None
    ) -> str:
        """What loop detection compares between calls (SPEC §14): identical outcomes of
        identical calls mean no progress."""
        return outcome_hash(
            inp.tool_name,
            arguments or {},
            text=result.text,
            is_error=result.is_error,
            error_message=result.text if result.is_error else None,
        )

    async def _record(
        self, inp: ToolCallInput, result: ToolResult, started: float
    ) -> TranscriptEntry:
        entry = tool_result_entry(
            inp.tool_call_id,
            inp.tool_name,
            result.text,
            inp.run_id,
            is_error=result.is_error,
            meta={
                "summary": result.summary
                or (redact(error_summary(result.text)) if result.is_error else ""),
                "duration_ms": int((time.monotonic() - started) * 1000),
                # Images stay in the transcript store; only their count reaches the workflow.
                **({IMAGES_META_KEY: list(result.images)} if result.images else {}),
                # Which host ran it (workspaces per host): where its effects are.
                **({"host": self.host} if self.host is not None else {}),
            },
        )
        written = await self.store.append(inp.session_key, [entry])
        if written:
            return written[0]
        # Something else answered first: that answer stands.
        stored = await self.store.tool_result(inp.session_key, inp.tool_call_id)
        return stored or entry

    async def _record_for_good(
        self, inp: ToolCallInput, result: ToolResult, started: float
    ) -> TranscriptEntry:
        """`_record`, asked again while the store cannot be reached, for a tool that is never
        run again: failing now would turn a command that finished into "interrupted" and lose
        its output (the heartbeats go on meanwhile). Other tools' retries run them again."""
        # Each ask may itself wait (a pool's connection timeout): the bound is on the clock.
        give_up = time.monotonic() + RECORD_WAIT_SECONDS
        while True:
            try:
                return await self._record(inp, result, started)
            except self.store.store.transient_errors as err:
                if inp.tool_name not in RUN_ONCE_TOOLS or time.monotonic() >= give_up:
                    raise
                log.warning(
                    "recording the result of %s %s waits for the store: %r",
                    inp.tool_name,
                    inp.tool_call_id,
                    err,
                )
            await asyncio.sleep(RECORD_RETRY_SECONDS)

    @staticmethod
    def _check_arguments(call: ToolCall) -> None:
        if call.raw_arguments is not None:
            raise InvalidToolArguments("tool arguments were not a JSON object")

    @activity.defn(name=tool_activity_name("read"))
    async def tool_read(self, inp: ToolCallInput) -> ToolCallOutcome:
        inp = self._here(inp)

        async def execute(call: ToolCall, _: EventLease) -> ToolResult:
            self._check_arguments(call)
            args = parse_args(ReadArgs, call.arguments)
            return await in_tool_thread(read_file, inp.workspace, args)

        return await self._run(inp, execute)

    @activity.defn(name=tool_activity_name("write"))
    async def tool_write(self, inp: ToolCallInput) -> ToolCallOutcome:
        inp = self._here(inp)

        async def execute(call: ToolCall, _: EventLease) -> ToolResult:
            self._check_arguments(call)
            args = parse_args(WriteArgs, call.arguments)
            return await in_tool_thread(write_file, inp.workspace, args)

        return await self._run(inp, execute)

    @activity.defn(name=tool_activity_name("edit"))
    async def tool_edit(self, inp: ToolCallInput) -> ToolCallOutcome:
        inp = self._here(inp)

        async def execute(call: ToolCall, _: EventLease) -> ToolResult:
            self._check_arguments(call)
            args = parse_args(EditArgs, call.arguments)
            applied = await self._mark_of(inp, "edit-applied")
            loop = asyncio.get_running_loop()

            def remember(digest: str) -> None:
                # Called from the edit's thread, just before it writes the file.
                asyncio.run_coroutine_threadsafe(
                    self._mark(inp, "edit-applied", digest), loop
                ).result()

            return await in_tool_thread(edit_file, inp.workspace, args, applied, remember)

        return await self._run(inp, execute)

    @activity.defn(name=tool_activity_name("exec"))
    async def tool_exec(self, inp: ToolCallInput) -> ToolCallOutcome:
        inp = self._here(inp)

        async def execute(call: ToolCall, publisher: EventLease) -> ToolResult:
            self._check_arguments(call)
            args = parse_args(ExecArgs, call.arguments)
            progress.what = args.command
            if not await self._mark(inp, "exec-started", args.command):
                return ToolResult(INTERRUPTED_EXEC, is_error=True, summary="interrupted")
            update = self._event(inp, EventKind.TOOL_EXECUTION_UPDATE)
            # The stream carries a redacted preview of the output; the whole of it (up to the
            # capture cap) goes to the transcript.
            shown = RedactedStream(
                STREAM_OUTPUT_CHARS,
                await self._secrets(),
                lambda at, text: publisher.text(update, at, text),
            )

            def on_output(chunk: str) -> None:
                shown.feed(chunk)
                progress.feed(chunk)

            try:
                return await run_exec(inp.workspace, args, on_output, inp.exec_timeout_seconds)
            finally:
                shown.flush()

        progress = ToolProgress("exec")
        return await self._run(inp, execute, progress)

    @activity.defn(name=tool_activity_name("apply_patch"))
    async def tool_apply_patch(self, inp: ToolCallInput) -> ToolCallOutcome:
        inp = self._here(inp)

        async def execute(call: ToolCall, _: EventLease) -> ToolResult:
            self._check_arguments(call)
            args = parse_args(ApplyPatchArgs, call.arguments)
            # The plan an earlier attempt saved before writing: finished, never re-applied.
            recorded = await self._mark_of(inp, "patch-plan")
            saved = load_plan(recorded.encode()) if recorded is not None else None
            loop = asyncio.get_running_loop()

            def remember(plan: dict[str, Any]) -> None:
                # Called from the patch's thread, before its first write.
                asyncio.run_coroutine_threadsafe(
                    self._mark(inp, "patch-plan", json.dumps(plan)), loop
                ).result()

            return await in_tool_thread(apply_patch, inp.workspace, args.input, saved, remember)

        outcome = await self._run(inp, execute)
        # The plan holds the whole new content of every file it changes: kept only while a
        # retry could need it, until the result is in the transcript.
        await self.store.store.forget_tool_mark(inp.session_key, inp.tool_call_id, "patch-plan")
        return outcome

    @activity.defn(name=tool_activity_name("process"))
    async def tool_process(self, inp: ToolCallInput) -> ToolCallOutcome:
        inp = self._here(inp)

        async def execute(call: ToolCall, _: EventLease) -> ToolResult:
            self._check_arguments(call)
            args = parse_args(ProcessArgs, call.arguments)
            progress.what = f"{args.action} {args.id or args.command or ''}".strip()
            interrupted = False
            if args.action == "start":
                # Like exec: a start that may have happened is not silently made twice.
                interrupted = not await self._mark(inp, "process-started", args.command or "")
            folder = self.store.session_dir(inp.session_key) / "processes"
            tool = ProcessTool(inp.session_key, folder)
            return await tool.run(
                inp.workspace, args, inp.tool_call_id, interrupted, inp.owner_gone
            )

        progress = ToolProgress("process")
        return await self._run(inp, execute, progress)

    def all(self) -> list[Callable[..., Awaitable[ToolCallOutcome]]]:
        return [
            self.tool_read,
            self.tool_write,
            self.tool_edit,
            self.tool_apply_patch,
            self.tool_exec,
            self.tool_process,
        ]
