"""The Python client API: how chat adapters, the CLI, cron and tests talk to sessions.

    client = await AgentlaneClient.connect()
    receipt = await client.send_and_start("alice", "read notes.txt then say done")
    async for item in client.watch("alice", from_offset=0, until_run=receipt.run_id):
        ...

`send` creates the session on its first message (update-with-start). `watch` follows the
session's event stream from any offset and resumes after reconnects; `MessageView` turns the
events into what a user should see (it drops text a retried model attempt repeats).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.failure.v1 import Failure
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    Plugin,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agentlane import search_attributes as sa
from agentlane.approvals import ApprovalDecision, ApprovalReceipt, PendingApproval
from agentlane.branches import (
    MEMO_BRANCH_POINT,
    MEMO_PARENT,
    BranchReceipt,
    ResetReceipt,
    ResetRequest,
    TreeNode,
    branch_key,
)
from agentlane.config import (
    CONTEXT_WINDOW_BLOCK_BELOW,
    AgentlaneConfig,
    ConfigError,
    ConfigWatcher,
    UnknownAgentError,
)
from agentlane.errors import ExecutionErrorKind
from agentlane.events import EVENTS_TOPIC, AgentEvent, EventKind
from agentlane.ids import (
    check_session_key,
    events_workflow_id,
    run_workflow_id,
    session_key_from_workflow_id,
    session_workflow_id,
    storage_name,
)
from agentlane.messages import (
    CLIENT_MESSAGE_ID_PREFIX,
    SESSION_ENDING,
    AbortReceipt,
    AbortRequest,
    FateState,
    InboundMessage,
    MessageFate,
    ModelSwitch,
    Routing,
    SendDisposition,
    SendReceipt,
    check_inbound,
)
from agentlane.queue_modes import QueueMode, parse_queue_mode
from agentlane.queue_settings import (
    QueueChange,
    QueueOptions,
    QueueSettings,
    parse_queue_directive,
)
from agentlane.run import EntrySource, ExecutionRequest, ExecutionResult, ModelRef
from agentlane.run_outcome import ended_in_temporal, result_of_failure
from agentlane.search_attribute_values import read as read_attributes
from agentlane.search_attribute_values import typed as typed_attributes
from agentlane.seen_events import SeenEvents
from agentlane.session import (
    BranchSource,
    RunProgress,
    SessionInput,
    SessionPhase,
    SessionSettings,
    SessionState,
    SessionStatus,
)
from agentlane.session_query import RUN_PHASES, RUNS_WAITING_OR_COMPACTING, SessionFilter
from agentlane.settings import WORKSPACES_FOLDER, Settings
from agentlane.static_details import branch_details, session_details
from agentlane.subagents import SUBAGENT_SEGMENT, subagent_key_refusal
from agentlane.task_priority import SESSION_PRIORITY
from agentlane.temporal_client import connect
from agentlane.tool_policy_config import AgentTools, ToolReport, policy_input
from agentlane.transcript import TranscriptEntry
from agentlane.webhook_targets import check_callback_target
from agentlane.webhooks import DELIVER_WEBHOOKS, WebhookStatus
from clients import schedules
from clients.api_errors import NoWorker as NoWorker
from clients.api_errors import SessionNotFound as SessionNotFound
from clients.api_errors import rejection_text
from clients.schedules import ScheduleRejected, ScheduleSummary, ScheduleView
from clients.stream_handover import HandOverAwareHandle
from store.open import shared_store
from store.sync import run_sync

if TYPE_CHECKING:
    # Workflow and activity code costs a command line 0.1-0.2 s to import: the methods that
    # use it import it (`status` names its queries and needs none of it).
    from workflows.session import SessionWorkflow

T = TypeVar("T")


class SendRejected(Exception):
    """The session refused the message (empty, too long, unknown mode, queue full...)."""


# `wait_started` of a steered message: how long the session's steering signal takes to reach
# the run, and for the session to queue again what an ended run did not take.
STEER_SIGNAL_SECONDS = 0.25
RUN_END_SETTLE_SECONDS = 0.5
# How long `wait_started` rides out a server it cannot reach (a restart) before it raises.
WAIT_STARTED_RECONNECT_SECONDS = 120.0
_RECONNECT_STATUSES = frozenset(
    {RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED}
)


class UnknownMessage(LookupError):
    """`wait_started` for a message number the session never gave."""


class ApprovalRejected(Exception):
    """A decision for an approval the session does not have waiting (unknown, or already
    decided or expired): the message says which."""


class BranchRejected(SendRejected):
    """The branch cannot be made (unknown entry, the new key is taken...); nothing was made."""


class WorkerBusy(NoWorker):
    """A worker polls the task queue but did not answer within the busy bound: it is loaded
    (or paused). What was sent is durably accepted where that is possible, as with `NoWorker`."""


# The queries `status` and `wait_for_run` make, by name: the method references would import the
# workflow code (tests/unit/test_client_query_names.py holds them equal).
SESSION_STATUS_QUERY = "status"  # SessionWorkflow.status
RUN_PROGRESS_QUERY = "progress"  # AgentRunWorkflow.progress
# Sub-agents nest at most `max_spawn_depth` deep; a bound keeps a malformed chain from looping.
MAX_SUBAGENT_HOPS = 16
# How long a call waits for a worker before saying there is none (the message stays accepted).
WORKER_WAIT_SECONDS = 4.0
NO_WORKER_HINT = "start one with `agentlane worker` (or run `./dev demo`)"
# With workers polling, how much longer a call waits for a busy session before giving up.
BUSY_WAIT_SECONDS = 60.0
# How long a send that met a session at its very end waits for that end before opening it anew.
SESSION_END_WAIT_SECONDS = 30.0
# How long `wait_for_run` waits for the session to record a closed run's end.
RUN_END_RECORDED_WAIT = 5.0
# How long `wait_for_run` waits for a run its receipt named to exist: an abort that meets the
# run while its session is still starting it names it a moment before Temporal has made it.
RUN_CREATED_WAIT = 10.0
# How long `read_events` keeps retrying an unreachable server.
READ_RETRY_SECONDS = 60.0
# A live worker renews its long poll at least this often (the server ends polls after a minute).
POLLER_FRESH_SECONDS = 75.0
# When a call's first answer is due: after this long with no worker polling, none is waited for.
ABSENCE_CHECK_SECONDS = 0.75
# How long a send waits for a restarted worker of this host (its predecessor stopped lately) to
# poll before saying no worker polls; and how often it looks meanwhile.
RESTART_GRACE_SECONDS = 15.0
RESTART_RECHECK_SECONDS = 0.5
# While waiting for a busy worker, how often the task queue's pollers are looked at again (a
# worker that stopped polling meanwhile is no longer waited for).
BUSY_RECHECK_SECONDS = 5.0


class _NoAnswer(Exception):
    """The call was given up: `presence` says whether a worker polls (busy) or none does."""

    def __init__(self, presence: WorkerPresence) -> None:
        super().__init__(presence.describe())
        self.presence = presence


def _known_gone(identity: str) -> bool:
    """A poller (`<pid>@<host>`, the SDK's identity) that was a process of this host which no
    longer runs: a worker stopped a moment ago is listed, and looks fresh, for a minute more."""
    pid, _, host = identity.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


@dataclass(frozen=True)
class WorkerPresence:
    """What the workflow task queue's pollers say (DescribeTaskQueue). The server lists a poller
    for minutes after its last poll, and a live worker starts a new long poll at least every
    minute, so a poller counts as present only while its `last_access_time` is recent: a
    worker that was killed or stopped keeps being listed, aging. A present worker that does not
    answer is busy (its task slots are taken) or paused; an absent one runs nothing."""

    task_queue: str
    # Seconds since the most recent poll of any listed poller; None when none is listed.
    last_poll_age: float | None
    # The server could not be asked: treated as present (never claim absence without evidence).
    unknown: bool = False
    # A worker of this host polled lately and its process is gone: stopped a moment ago, maybe
    # being restarted (a new one polls a few seconds after it starts).
    just_stopped: bool = False

    @property
    def polling(self) -> bool:
        if self.unknown:
            return True
        return self.last_poll_age is not None and self.last_poll_age < POLLER_FRESH_SECONDS

    def describe(self) -> str:
        if self.unknown:
            return f"the worker on task queue {self.task_queue} could not be checked"
        if self.polling:
            return (
                f"a worker polls task queue {self.task_queue} (last poll "
                f"{self.last_poll_age:.0f} s ago) but is busy"
            )
        if self.last_poll_age is None:
            return f"no worker polls task queue {self.task_queue}"
        return (
            f"no worker polls task queue {self.task_queue} (the last poll was "
            f"{self.last_poll_age:.0f} s ago: its worker stopped)"
        )


@dataclass
class SessionListing:
    rows: list[dict[str, object]] = field(default_factory=list)
    # The visibility queries that found them, in order (the runs' first when a filter needs it).
    queries: list[str] = field(default_factory=list)


@dataclass
class StreamItem:
    offset: int
    event: AgentEvent


def gap_notice(session_key: str, requested: int, first: Any) -> AgentEvent:
    """What a watcher is told of events the stream no longer holds (`first`: the first item
    it still has)."""
    missed = first.offset - requested
    return AgentEvent(
        kind=EventKind.STREAM_GAP,
        event_id=f"{session_key}/gap/{requested}-{first.offset}",
        session_key=session_key,
        run_id=first.data.run_id,
        text=(
            f"{missed} earlier event{'s are' if missed != 1 else ' is'} no longer in the stream "
            f"(offsets {requested}-{first.offset - 1}): `agentlane transcript {session_key}` "
            "has what was said"
        ),
        data={"requested": requested, "first_available": first.offset, "missed": missed},
    )


@dataclass
class MessageView:
    """Folds events into the text a user should see, one string per assistant message.

    Deltas carry their character position, so a retried attempt that repeats a prefix adds
    nothing; a `message_reset` drops what an abandoned attempt showed.
    """

    texts: dict[str, str] = field(default_factory=dict)
    seen_ids: set[str] = field(default_factory=set)

    def apply(self, event: AgentEvent) -> str | None:
        """Return the text newly visible because of `event` (None if it is not text)."""
        if event.event_id in self.seen_ids and event.kind != EventKind.TEXT_DELTA:
            return None
        self.seen_ids.add(event.event_id)
        mid = event.message_id or ""
        if event.kind == EventKind.MESSAGE_RESET:
            self.texts[mid] = ""
            return None
        if event.kind != EventKind.TEXT_DELTA or not event.text or event.index is None:
            return None
        current = self.texts.get(mid, "")
        if event.index > len(current):
            # A gap can only mean events were truncated away; show what we have.
            current = current.ljust(event.index)
        new_end = event.index + len(event.text)
        if new_end <= len(current):
            return ""
        fresh = event.text[len(current) - event.index :]
        self.texts[mid] = current[: event.index] + event.text
        return fresh


def cli_identity() -> str:
    """Who the CLI is in history: `agentlane-cli <user>@<host>`."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        user = f"uid{os.getuid()}"
    return f"agentlane-cli {user}@{socket.gethostname()}"


class AgentlaneClient:
    def __init__(self, client: Client, settings: Settings, plugins: Sequence[Plugin] = ()) -> None:
        self.client = client
        self.settings = settings
        self.plugins = plugins
        self._config_watcher = ConfigWatcher(settings.data_dir)

    @classmethod
    async def connect(
        cls,
        settings: Settings | None = None,
        plugins: Sequence[Plugin] = (),
        identity: str | None = None,
    ) -> AgentlaneClient:
        """`plugins`: e.g. the SDK's OpenTelemetryPlugin, which carries the caller's trace
        context into the session (the gateway does this with tracing on). `identity`: who this
        client is in history and in the aborts it asks for (None: the SDK's `<pid>@<host>`)."""
        settings = settings or Settings.from_env()
        client = await connect(settings, plugins=plugins, identity=identity)
        return cls(client, settings, plugins)

    @classmethod
    async def connect_cli(cls, settings: Settings | None = None) -> AgentlaneClient:
        """The CLI's client: `agentlane-cli <user>@<host>` in history and in its aborts."""
        _quiet_sdk_core()
        return await cls.connect(settings, identity=cli_identity())

    async def with_identity(self, identity: str) -> AgentlaneClient:
        """The same server and settings under another identity (the SDK keeps one identity per
        connection, so this is a connection of its own)."""
        return await AgentlaneClient.connect(self.settings, self.plugins, identity)

    # -- sending ----------------------------------------------------------------------------

    def _config(self) -> AgentlaneConfig:
        return self._config_watcher.current()

    def _default_model(self, agent_id: str = "main") -> str:
        """The model the agent's table names, else AGENTLANE_MODEL, else the config file's
        default_model, else the offline model. `[agents.main] model = …` is what a user writes
        to choose the model their sessions talk to: a new session starts on it."""
        named = self._config().agents.get(agent_id)
        if named is not None and named.model:
            return named.model
        if os.environ.get("AGENTLANE_MODEL"):
            return self.settings.default_model
        return self._config().default_model

    def _model_switch(self, ref: str) -> ModelSwitch:
        """`ref` (provider/model) checked against the configuration, with its context window."""
        config = self._config()
        try:
            known = config.model(ref)
        except ConfigError as err:
            raise SendRejected(str(err)) from err
        provider, _, name = ref.partition("/")
        window = config.context_window(ref, "main")
        if 0 < window < CONTEXT_WINDOW_BLOCK_BELOW:
            # Every run on it would end before its first call (SPEC §9's guard).
            raise SendRejected(
                f"{ref}'s context window is {window} tokens, under the "
                f"{CONTEXT_WINDOW_BLOCK_BELOW} a run needs; choose another model, or give this "
                "one a larger `context_window` in the config"
            )
        return ModelSwitch(
            provider=provider,
            model=name or "default",
            context_window=window,
            context_window_source="agentContextTokens"
            if window < known.context_window
            else "model",
        )

    def _new_session_state(
        self, key: str, workspace: str | None, model: str | None, overrides: dict[str, object]
    ) -> SessionState:
        create = workspace is None
        # A default workspace is named relative to a data dir: with workspaces per host, the
        # data dir of the host its tools run on (activities/tools/workspace.py
        # `local_workspace`), not this client's, which that host may not have. A shared one
        # is this client's path, on the filesystem every host mounts.
        default = (
            f"{WORKSPACES_FOLDER}/{storage_name(key)}"
            if self.settings.workspaces == "host"
            else str(self.settings.workspaces_dir / storage_name(key))
        )
        ws = workspace or default
        agent_id = str(overrides.get("agent_id") or "main")
        chosen = self._model_switch(model or self._default_model(agent_id))
        config = self._config()
        try:
            agent = config.agent(agent_id)
        except UnknownAgentError:
            agent = config.agent("main")
        thinking = agent.thinking
        window, source = chosen.context_window, chosen.context_window_source
        provider, name = chosen.provider, chosen.model
        base: dict[str, object] = {
            "queue": config.queue,
            "loop_detection": config.loop_detection,
            "subagents": config.subagents,
            "approvals": config.approval if config.approval.require else None,
            "context_window": window,
            "context_window_source": source,
            "thinking": thinking,
            "reasoning_mode": agent.reasoning,
            "host_wait_seconds": self.settings.host_wait_seconds,
        }
        # The agent's limits for its new sessions (the session's settings keep them after).
        if agent.idle_timeout_seconds is not None:
            base["idle_timeout_seconds"] = agent.idle_timeout_seconds
        if agent.max_wait_seconds is not None:
            base["max_wait_seconds"] = agent.max_wait_seconds
        if not create and self.settings.workspaces == "host":
            # A workspace named here was checked on this host's disk: its tools run here.
            base["workspace_host"] = self.settings.host_id
        unknown = sorted(set(overrides) - set(SessionSettings.model_fields))
        if unknown:
            raise SendRejected(f"unknown session setting(s): {', '.join(unknown)}")
        try:
            settings = SessionSettings.model_validate(
                {
                    **base,
                    "workspace": str(Path(ws).resolve()) if not create else ws,
                    "create_workspace": create,
                    "model": ModelRef(provider=provider, model=name),
                    **overrides,
                }
            )
        except ValueError as err:  # pydantic's ValidationError: which setting, plainly
            raise SendRejected(rejection_text(err)) from None
        return SessionState(key=key, settings=settings)

    async def send(
        self,
        session_key: str,
        text: str,
        *,
        mode: str | None = None,
        message_id: str | None = None,
        routing: Routing | None = None,
        sender: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
        session_overrides: dict[str, object] | None = None,
        queue: QueueOptions | str | None = None,
        worker_wait: float = WORKER_WAIT_SECONDS,
        source: EntrySource = EntrySource.CHAT,
        thinking: str | None = None,
        reasoning: str | None = None,
        on_wait: Callable[[str], None] | None = None,
        workspace_host: str | None = None,
    ) -> SendReceipt:
        """Send a message, creating the session if it does not exist yet.

        Returns once the session holds the message durably, not when its run starts (learn that
        from the event stream, or with `wait_started`). `queue` sets queue options for this
        message alone (SPEC §17.2 inline: `QueueOptions`, or directive words such as
        "debounce:0 cap:5"). `thinking` sets the session's thinking level (SPEC §6 words) for
        the runs that start from this message on, `reasoning` what they show of the model's
        reasoning (off, on, stream). `workspace_host`: the host whose disk holds `workspace`
        (a schedule's firing names its creator's); None: this client's. With no worker
        answering within `worker_wait` seconds the message is handed over as a signal, which
        the server keeps in history until a worker runs it, and `NoWorker` says so; a worker
        that polls but is busy is waited for first (`on_wait` is told), then `WorkerBusy` says
        the same."""
        from workflows.session import SessionWorkflow

        key = check_session_key(session_key)
        refused = subagent_key_refusal(key)
        if refused is not None:
            # A message here would start a second run on the same transcript, beside it.
            raise SendRejected(refused)
        elsewhere = workspace_host is not None and workspace_host != self.settings.host_id
        if (
            workspace is not None
            and not elsewhere
            and not await asyncio.to_thread(Path(workspace).is_dir)
        ):
            raise SendRejected(f"workspace {workspace} does not exist or is not a folder")
        unserved = (
            await self._host_unserved(workspace)
            if workspace is not None and self.settings.workspaces == "host" and not elsewhere
            else None
        )
        try:
            options = _queue_options(queue)
            if mode is not None and options is not None and options.mode is not None:
                try:
                    named: QueueMode | None = parse_queue_mode(mode)
                except ValueError:
                    named = None  # the session says what is wrong with it
                if named is not None and named != options.mode:
                    raise ValueError(
                        f"the message names two modes ({mode} and queue mode:"
                        f"{options.mode.value}); give one"
                    )
            message = InboundMessage(
                text=text,
                mode=mode,
                queue=options,
                # A redelivery through the no-worker path must not run twice.
                message_id=message_id or f"{CLIENT_MESSAGE_ID_PREFIX}{uuid.uuid4().hex}",
                routing=routing or Routing(),
                sender=sender,
                workspace=workspace,
                source=source,
                thinking=thinking,
                reasoning=reasoning,
                by=self.client.identity,
                switch_model=self._model_switch(model) if model is not None else None,
            )
            check_inbound(message)
            if message.routing.callback_url is not None:
                # A literal address inside the network is refused here; names when connecting.
                check_callback_target(message.routing.callback_url, self._config().webhooks)
            ref = message.routing.callback_secret_ref
            if ref is not None:
                # Missing, every delivery would fail for a day; said now, to the sender.
                await self._secret_exists(ref)
        except ValueError as err:
            raise SendRejected(rejection_text(err)) from err
        state = self._new_session_state(key, workspace, model, session_overrides or {})
        if elsewhere and workspace is not None:
            # Checked on that host's disk when it was named: its tools run there.
            state.settings.workspace_host = workspace_host
        pinned = state.settings.auth_profile
        # What this message names wins over what a closed session with this key had.
        explicit = [
            *(["workspace", "create_workspace", "workspace_host"] if workspace is not None else []),
            *(["model", "context_window", "context_window_source"] if model is not None else []),
            *(session_overrides or {}),
        ]
        attempts = 0
        operations: list[WithStartWorkflowOperation[Any, Any]] = []

        async def attempt() -> SendReceipt:
            nonlocal attempts
            attempts += 1
            operation = self._start_operation(
                key, state, explicit, message.routing.channel, message.sender
            )
            operations.append(operation)
            answer: SendReceipt = await self.client.execute_update_with_start_workflow(
                SessionWorkflow.send, message, start_workflow_operation=operation
            )
            return answer

        async def attempt_or_after_end() -> SendReceipt:
            try:
                return await attempt()
            except WorkflowUpdateFailedError as err:
                if SESSION_ENDING not in _failure_text(err):
                    raise
            # It arrived as the session ended: once it has, this message opens it anew.
            await self._wait_ended(key)
            return await attempt()

        call = asyncio.ensure_future(self._with_backoff(attempt_or_after_end))
        try:
            # A message, unlike a status query, is worth waiting for a restarting worker: said
            # "not taken", a script sends the next one, and the two run as one.
            grace = RESTART_GRACE_SECONDS if worker_wait >= WORKER_WAIT_SECONDS else 0.0
            receipt: SendReceipt = await self._answer_or_no_worker(
                call, worker_wait, on_wait, restart_grace=grace
            )
            if attempts > 1:
                receipt = _own_duplicate(receipt)
            if unserved is not None:
                note = f"{receipt.note}; {unserved}" if receipt.note else unserved
                receipt = receipt.model_copy(update={"note": note})
            profile_note: str | None = None
            if pinned and receipt.message_seq > 1:
                # A pin is set when a session is made (README): said, not silently ignored.
                profile_note = (
                    f"--profile {pinned} is not taken: the session exists, and its profile is "
                    "chosen when it is made (a new session key takes it)"
                )
            elif pinned:
                profile_note = await self._profile_note(pinned, state)
            if profile_note is not None:
                note = f"{receipt.note}; {profile_note}" if receipt.note else profile_note
                receipt = receipt.model_copy(update={"note": note})
            if workspace is not None and receipt.message_seq > 1:
                # Not a session this message made: it may have a workspace of its own already.
                receipt = await self._with_workspace_note(key, state, receipt)
            return receipt
        except WorkflowUpdateFailedError as err:
            raise SendRejected(_failure_text(err)) from err
        except _NoAnswer as gave_up:
            presence = gave_up.presence
            # The cancelled call left its start operation holding the cancel: taken here, or
            # the interpreter prints "Future exception was never retrieved" for each send.
            for operation in operations:
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(operation.workflow_handle(), 0.01)
        await self.client.start_workflow(
            SessionWorkflow.run,
            SessionInput(state=state, fresh=True, explicit=explicit),
            **self._session_start_options(key, state, message.routing.channel, message.sender),
            start_signal="enqueue",
            start_signal_args=[message],
        )
        if presence.polling:
            raise WorkerBusy(
                f"message durably queued in session {key}: {presence.describe()} and did not "
                f"answer within {worker_wait + BUSY_WAIT_SECONDS:.0f} s; it runs when the worker "
                f"gets to it (or start another one with `agentlane worker`)"
            )
        raise NoWorker(
            f"message durably queued in session {key}, but {presence.describe()}: it runs "
            f"when a worker starts; {NO_WORKER_HINT}"
        )

    async def _wait_ended(self, key: str, within: float = SESSION_END_WAIT_SECONDS) -> None:
        """Until the session workflow of `key` has ended (a closed session finishing its last
        steps), at most `within` seconds."""
        handle = self.client.get_workflow_handle(session_workflow_id(key))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(handle.result(), within)

    def _start_operation(
        self,
        key: str,
        state: SessionState,
        explicit: list[str],
        channel: str | None,
        sender: str | None = None,
    ) -> WithStartWorkflowOperation[SessionWorkflow, None]:
        # One operation per call: the SDK fills in its result and it cannot be reused.
        from workflows.session import SessionWorkflow

        return WithStartWorkflowOperation(
            SessionWorkflow.run,
            SessionInput(state=state, fresh=True, explicit=explicit),
            **self._session_start_options(key, state, channel, sender),
        )

    def _session_details(
        self, state: SessionState, channel: str | None = None, sender: str | None = None
    ) -> str:
        """The session's static details in the UI: what it works on and who made it."""
        return session_details(
            workspace=state.settings.workspace,
            model=state.settings.model.label(),
            agent=state.settings.agent_id,
            channel=channel,
            created_by=self.client.identity,
            sender=sender,
        )

    def _session_start_options(
        self,
        key: str,
        state: SessionState | None = None,
        channel: str | None = None,
        sender: str | None = None,
    ) -> dict[str, Any]:
        options: dict[str, Any] = {
            "id": session_workflow_id(key),
            "task_queue": self.settings.workflow_task_queue,
            "id_conflict_policy": WorkflowIDConflictPolicy.USE_EXISTING,
            "static_summary": f"chat session **{key}**",
            # A message waits for this workflow's task: served before runs' (task_priority.py).
            "priority": SESSION_PRIORITY,
        }
        if state is not None:
            # What the session's page in the UI shows for good (markdown; ignored, like the
            # attributes below, when the session already runs).
            options["static_details"] = self._session_details(state, channel, sender)
            # Findable from its start (no history event for these); the session upserts what
            # changes later. Ignored when the session already runs (USE_EXISTING).
            options["search_attributes"] = typed_attributes(
                {
                    sa.SESSION_KEY.name: key,
                    sa.AGENT.name: state.settings.agent_id,
                    sa.MODEL.name: state.settings.model.label(),
                    sa.CHANNEL.name: channel,
                    sa.PHASE.name: "idle",
                }
            )
        return options

    async def _answer_or_no_worker(
        self,
        call: asyncio.Future[T],
        worker_wait: float,
        on_wait: Callable[[str], None] | None = None,
        restart_grace: float = 0.0,
    ) -> T:
        """The call's answer; `_NoAnswer` (the call cancelled) when no worker polls the task
        queue after `worker_wait`. A worker that polls but does not answer is busy: load is not
        absence, so it is waited for (up to `BUSY_WAIT_SECONDS`, `on_wait` told why) while it
        keeps polling."""
        # Asked early: with no worker polling at all there is nothing to wait for. Not at once:
        # a worker that has just started polls a moment after it says it is ready.
        first = min(worker_wait, ABSENCE_CHECK_SECONDS)
        done, _ = await asyncio.wait({call}, timeout=first)
        if not done:
            presence = await self.worker_presence()
            # A worker here stopped a moment ago: a restart's new worker polls once it has
            # started (a few seconds), and would take the message then.
            grace = time.monotonic() + restart_grace
            while not done and not presence.polling and presence.just_stopped:
                if time.monotonic() >= grace:
                    break
                done, _ = await asyncio.wait({call}, timeout=RESTART_RECHECK_SECONDS)
                if not done:
                    presence = await self.worker_presence()
            if not done and presence.polling:
                done, _ = await asyncio.wait({call}, timeout=worker_wait - first)
                if not done:
                    presence = await self.worker_presence()
        if done:
            return call.result()
        if presence.polling:
            if on_wait is not None:
                on_wait(
                    f"{presence.describe()}; waiting up to {BUSY_WAIT_SECONDS:.0f} s for it "
                    "to answer"
                )
            deadline = time.monotonic() + BUSY_WAIT_SECONDS
            while not done and presence.polling:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                done, _ = await asyncio.wait({call}, timeout=min(BUSY_RECHECK_SECONDS, left))
                if not done:
                    presence = await self.worker_presence()
        if done:
            return call.result()
        call.cancel()
        try:
            await call
        except BaseException:
            pass  # the cancelled call's own error says nothing more
        raise _NoAnswer(presence)

    async def worker_presence(
        self,
        queue: str | None = None,
        kind: TaskQueueType.ValueType = TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    ) -> WorkerPresence:
        """Whether a worker polls the workflow task queue, or `queue` for tasks of `kind` (see
        `WorkerPresence`)."""
        queue = queue or self.settings.workflow_task_queue
        request = DescribeTaskQueueRequest(
            namespace=self.client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=kind,
        )
        try:
            response = await self.client.workflow_service.describe_task_queue(request)
        except RPCError:
            return WorkerPresence(queue, None, unknown=True)
        now = time.time()
        ages: list[float] = []
        just_stopped = False
        for poller in response.pollers:
            age = now - poller.last_access_time.ToSeconds()
            if not _known_gone(poller.identity):
                ages.append(age)
            elif age < POLLER_FRESH_SECONDS:
                just_stopped = True
        return WorkerPresence(
            queue, max(0.0, min(ages)) if ages else None, just_stopped=just_stopped
        )

    async def _host_unserved(self, workspace: str) -> str | None:
        """A workspace a client names is taken to be on the client's host's disk: its session's
        tools go to that host's queue. With workers running but none of that host seen (the
        server lists a queue's pollers for minutes after their last poll), the run would wait
        for one (`host_wait_seconds`), then fail: a warning for the receipt, saying what to
        set. Not a refusal: on a cluster a task queue has several partitions, and the one
        described may not have seen a worker that polls another yet."""
        served = await self.worker_presence(
            self.settings.host_task_queue, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
        )
        if served.unknown or served.last_poll_age is not None:
            return None  # a worker of this host, now or lately
        if not (await self.worker_presence()).polling:
            return None  # no worker at all: the send says so
        return (
            f"warning: no worker of host {self.settings.host_id!r} (this client's host id: "
            "AGENTLANE_HOST_ID, else the hostname) is seen; a workspace named here "
            f"({workspace}) is taken to be on this host's disk, so the session's tools wait for "
            "a worker of this host. Set AGENTLANE_HOST_ID to the id of the host whose disk "
            "holds the folder, or run a worker here (or, with a filesystem every host mounts, "
            "AGENTLANE_WORKSPACES=shared)"
        )

    async def workers_polling(self) -> bool:
        """Whether a worker polled the workflow task queue recently (a live worker always has a
        long poll open, renewed at least every minute)."""
        return (await self.worker_presence()).polling

    @staticmethod
    async def _with_backoff(call: Callable[[], Awaitable[T]]) -> T:
        """Retry what the server refused for load (a workflow takes only so many updates at
        once) and updates it aborted because the session continued as new or closed under them:
        a burst of senders waits its turn instead of failing. A retried send that the session had
        in fact taken comes back as its own duplicate (see `_own_duplicate`). Also an update
        the server dropped because the workflow task that carried it went unprocessed (a worker
        paused or overloaded past the task timeout), or refused while such a task is retried:
        it was never taken."""
        delay = 0.02
        while True:
            try:
                return await call()
            except RPCError as err:
                if not _retryable(err):
                    raise
            except WorkflowUpdateFailedError as err:
                if UNPROCESSED_UPDATE not in _failure_text(err):
                    raise
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)

    async def configure_queue(
        self,
        session_key: str,
        directive: str | QueueOptions,
        on_wait: Callable[[str], None] | None = None,
    ) -> QueueSettings:
        """The `/queue` directive (SPEC §17.2): `mode:collect debounce:2s cap:10 drop:old`, a bare
        mode word, or `reset`. Answers the settings now in force."""
        from workflows.session import SessionWorkflow

        key = check_session_key(session_key)
        if isinstance(directive, str):
            try:
                parsed = parse_queue_directive(directive)
            except ValueError as err:
                raise SendRejected(str(err)) from err
            change = QueueChange(reset=True) if parsed == "reset" else QueueChange(options=parsed)
        else:
            change = QueueChange(options=directive)
        handle = await self._running_session(key)
        call = asyncio.ensure_future(
            self._with_backoff(
                lambda: handle.execute_update(SessionWorkflow.configure_queue, change)
            )
        )
        try:
            settings: QueueSettings = await self._answer_or_no_worker(
                call, WORKER_WAIT_SECONDS, on_wait
            )
        except _NoAnswer as gave_up:
            if gave_up.presence.polling:
                raise _no_worker(key, gave_up.presence) from None
            # The server keeps the update it took and a worker that starts applies it: said
            # so, not "failed", or the change comes as a surprise.
            raise NoWorker(
                f"session {key} exists, but {gave_up.presence.describe()}: the change is not "
                "confirmed; the server holds it for the session and a worker that starts "
                f"applies it (`agentlane queue {key}` then shows what is in force); "
                f"{NO_WORKER_HINT}"
            ) from None
        return settings

    async def send_and_start(self, session_key: str, text: str, **kwargs: Any) -> SendReceipt:
        """`send`, then wait until a message that starts a run (an idle session, an interrupt)
        has its run id. Queued and steered messages return at once, as from `send`."""
        receipt = await self.send(session_key, text, **kwargs)
        if receipt.disposition in (SendDisposition.STARTED, SendDisposition.INTERRUPTED):
            fate = await self.wait_started(session_key, receipt.message_seq)
            receipt = receipt.model_copy(update={"run_id": fate.run_id})
        return receipt

    async def _with_workspace_note(
        self, key: str, asked: SessionState, receipt: SendReceipt
    ) -> SendReceipt:
        """A workspace named for a session that has one already is not taken (it is fixed when
        the session is made): the receipt says so rather than nothing."""
        try:
            status = await self.status(key)
        except (SessionNotFound, RPCError):
            return receipt
        if not status.workspace:
            return receipt
        host = status.workspace_host
        other_host = asked.settings.workspace_host is not None and host not in (
            None,
            asked.settings.workspace_host,
        )
        if status.workspace == asked.settings.workspace and not other_host:
            return receipt
        where = f"{status.workspace} on host {host}" if other_host else status.workspace
        said = (
            f"the session's workspace is fixed when it is made: it stays {where} "
            "(reset keeps it too; a new session key takes a new one)"
        )
        return receipt.model_copy(
            update={"note": f"{receipt.note}; {said}" if receipt.note else said}
        )

    async def _secret_exists(self, ref: str) -> None:
        from agentlane.webhook_secrets import SecretMissing, WebhookSecretStore

        try:
            await asyncio.to_thread(WebhookSecretStore(self.settings).get, ref)
        except SecretMissing as err:
            raise ValueError(str(err)) from None

    async def wait_started(self, session_key: str, seq: int) -> MessageFate:
        """Until message `seq` is taken by a run (or steered, dropped or given up)."""
        from workflows.session import SessionWorkflow

        key = check_session_key(session_key)
        handle = self.client.get_workflow_handle(session_workflow_id(key))
        pause = 0.05
        steer_settled = False
        reconnecting_since: float | None = None
        while True:
            try:
                fate: MessageFate = await self._with_backoff(
                    lambda: handle.execute_update(SessionWorkflow.wait_started, seq)
                )
            except WorkflowUpdateFailedError as err:
                # The session's own words ("session s1 has no message #99999"), not the SDK's.
                raise UnknownMessage(_failure_text(err)) from None
            except (WorkflowUpdateRPCTimeoutOrCancelledError, RPCError) as err:
                # The server restarting under a long wait: asking again only waits (the update
                # changes nothing), for as long as a worker rides a restart out.
                if isinstance(err, RPCError) and err.status not in _RECONNECT_STATUSES:
                    raise
                if reconnecting_since is None:
                    reconnecting_since = time.monotonic()
                if time.monotonic() - reconnecting_since > WAIT_STARTED_RECONNECT_SECONDS:
                    raise
                await asyncio.sleep(1.0)
                continue
            reconnecting_since = None
            if fate.state == FateState.DUPLICATE and fate.duplicate_of not in (None, seq):
                # A redelivery: answer with the run that takes (or took) the message it repeats.
                assert fate.duplicate_of is not None
                original = await self.wait_started(key, fate.duplicate_of)
                return fate.model_copy(
                    update={
                        "run_id": original.run_id,
                        "note": f"{fate.note}: message #{original.seq}, {original.state.value}"
                        + (f" by {original.run_id}" if original.run_id else ""),
                    }
                )
            if fate.state == FateState.STEERED and fate.run_id and not steer_settled:
                # Handed to a run is not taken by it: the run may end (an abort, an interrupt)
                # before its next model call takes the turn, and the session then queues it
                # again for a later run. Answered once the run has taken it or ended.
                await self._steer_taken_or_run_over(fate.run_id)
                steer_settled = True
                continue
            if fate.state != FateState.PENDING:
                return fate
            # The session is continuing as new (a moment), holds enough waiting callers
            # already, or is one recorded before its answer waited for a queued message's start:
            # asked again at growing intervals, each ask an update in the session's history.
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    async def _steer_taken_or_run_over(self, run_id: str) -> None:
        """Until the run has no steering waiting (its model call took it) or has ended, and the
        session has had a moment to queue again what an ended run did not take."""
        await asyncio.sleep(STEER_SIGNAL_SECONDS)  # the session's signal reaching the run
        handle = self.client.get_workflow_handle(run_id)
        pause = 0.2
        while True:
            try:
                running = (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
            except RPCError:
                running = False
            progress = await self.run_progress(run_id) if running else None
            if progress is None:
                await asyncio.sleep(RUN_END_SETTLE_SECONDS)
                return
            if progress.pending_steer == 0:
                return
            # A run in a long tool call takes its steering only after it: asked less often.
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    async def close(self, session_key: str) -> None:
        """End the session once its queue is empty (its event stream ends with it). A later
        message to the same key starts a new session with the same transcript."""
        from workflows.session import SessionWorkflow

        handle = await self._running_session(check_session_key(session_key))
        await handle.signal(SessionWorkflow.close)

    async def abort(
        self,
        session_key: str,
        reason: str = "user abort",
        on_wait: Callable[[str], None] | None = None,
    ) -> AbortReceipt:
        """Abort the session's run in flight. The receipt names it, or says there was none."""
        from workflows.session import SessionWorkflow

        key = check_session_key(session_key)
        handle = await self._running_session(key)
        call = asyncio.ensure_future(
            self._with_backoff(
                lambda: handle.execute_update(
                    SessionWorkflow.abort_run, AbortRequest(reason=reason, by=self.client.identity)
                )
            )
        )
        try:
            receipt: AbortReceipt = await self._answer_or_no_worker(
                call, WORKER_WAIT_SECONDS, on_wait
            )
            return receipt
        except _NoAnswer as gave_up:
            presence = gave_up.presence
        # The signal is durable: the run stops as soon as a worker picks the session up.
        await handle.signal(
            SessionWorkflow.abort, AbortRequest(reason=reason, by=self.client.identity)
        )
        if presence.polling:
            raise WorkerBusy(
                f"abort recorded for session {key}, but {presence.describe()}: it takes effect "
                "when the worker gets to it"
            )
        raise NoWorker(
            f"abort recorded for session {key}, but {presence.describe()}: it takes effect "
            f"when a worker starts; {NO_WORKER_HINT}"
        )

    # -- approvals (issue 21) ---------------------------------------------------------------

    async def approvals(self, session_key: str) -> list[PendingApproval]:
        """The session's tool calls waiting for a person's yes, oldest first. A sub-agent's wait
        in its top-level session (workflows/approval_wait.py): for a sub-agent's key, those of
        its top-level session that the sub-agent asked."""
        key = check_session_key(session_key)
        top = await self.top_session_of(key)
        pending = (await self.status(top)).approvals
        return pending if top == key else [a for a in pending if a.session_key == key]

    async def top_session_of(self, session_key: str) -> str:
        """The top-level session a sub-agent's session belongs to (its run is a child of the
        run that spawned it, up to a session's own run); a top-level key is its own."""
        key = session_key
        for _ in range(MAX_SUBAGENT_HOPS):
            if SUBAGENT_SEGMENT not in key:
                return key
            try:
                desc = await self.client.get_workflow_handle(run_workflow_id(key, 1)).describe()
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    raise SessionNotFound(f"sub-agent session {key} does not exist") from err
                raise
            if not desc.parent_id:
                return key
            key = session_key_from_workflow_id(desc.parent_id)
        return key

    async def decide_approval(
        self,
        session_key: str,
        approval_id: str,
        approve: bool,
        reason: str = "",
        by: str = "",
    ) -> ApprovalReceipt:
        """Approve or deny a waiting tool call; the receipt says what became of it (approved,
        denied, or expired first). An unknown or already decided id is `ApprovalRejected`."""
        from workflows.session import SessionWorkflow

        # A sub-agent's approvals are decided in its top-level session.
        key = await self.top_session_of(check_session_key(session_key))
        try:
            decision = ApprovalDecision(id=approval_id, approve=approve, reason=reason, by=by)
        except ValueError as err:  # a pydantic ValidationError: say which field, plainly
            raise ApprovalRejected(rejection_text(err)) from None
        handle = await self._running_session(key)
        call = asyncio.ensure_future(
            self._with_backoff(
                lambda: handle.execute_update(SessionWorkflow.decide_approval, decision)
            )
        )
        try:
            receipt: ApprovalReceipt = await self._answer_or_no_worker(call, WORKER_WAIT_SECONDS)
        except WorkflowUpdateFailedError as err:
            raise ApprovalRejected(_failure_text(err)) from err
        except _NoAnswer as gave_up:
            raise NoWorker(
                f"session {key} exists, but {gave_up.presence.describe()}, so the decision is "
                f"not confirmed; {NO_WORKER_HINT}"
            ) from None
        return receipt

    # -- reset and branches (issue 10) --------------------------------------------------------

    async def reset(
        self, session_key: str, reason: str = "user reset", by: str = "client"
    ) -> ResetReceipt:
        """Start the session afresh: nothing before the reset is sent to the model again (the
        old branch stays in the transcript). A busy run is aborted and has ended when this
        returns; queued messages are kept and answered next, in the fresh context."""
        from workflows.session import SessionWorkflow

        key = check_session_key(session_key)
        handle = await self._running_session(key)
        request = ResetRequest(reason=reason, by=by)
        call = asyncio.ensure_future(
            self._with_backoff(lambda: handle.execute_update(SessionWorkflow.reset, request))
        )
        try:
            receipt: ResetReceipt = await self._answer_or_no_worker(call, WORKER_WAIT_SECONDS)
        except WorkflowUpdateFailedError as err:
            raise SendRejected(_failure_text(err)) from err
        except _NoAnswer as gave_up:
            raise NoWorker(
                f"session {key} exists, but {gave_up.presence.describe()}, so the reset is not "
                f"confirmed (it may still happen when a worker starts); {NO_WORKER_HINT}"
            ) from None
        return receipt

    async def branch(
        self, session_key: str, from_entry: str, new_key: str | None = None
    ) -> BranchReceipt:
        """A new session whose history is `session_key`'s branch up to and including entry
        `from_entry` (seed 001 §9.7); it keeps the parent's settings, and both go on
        independently. `new_key` defaults to `<parent>-b<n>` (the first free one). Nothing is
        made when the parent or the entry is unknown or the new key is taken."""
        from activities.branch_history import UnknownEntry, branch_path
        from workflows.session import SessionWorkflow

        parent = check_session_key(session_key)
        entries = await asyncio.to_thread(self.transcript, parent)
        if not entries:
            if await self.session_exists(parent):
                raise BranchRejected(f"session {parent} has no transcript entries yet")
            raise SessionNotFound(f"session {parent} does not exist (no transcript)")
        try:
            branch_path(entries, from_entry)
        except UnknownEntry:
            raise BranchRejected(
                f"session {parent} has no entry {from_entry!r}; `agentlane transcript {parent} "
                "--all` shows every entry id"
            ) from None
        key = check_session_key(new_key) if new_key else await self._free_branch_key(parent)
        if subagent_key_refusal(key) is not None:
            raise BranchRejected(
                f"{key} is the form of a sub-agent's key, which the engine makes and which takes "
                "no messages; choose another key for the branch (--to)"
            )
        if await self._key_taken(key):
            raise BranchRejected(
                f"session {key} already exists; choose another key for the branch (--to)"
            )
        state = self._new_session_state(key, None, None, {})
        source = BranchSource(parent_session=parent, branch_point=from_entry)
        # Started together with the update that waits for the copy: if the copy fails, the
        # update is there to say why before the workflow ends. One attempt: a retry would find
        # the session it started.
        options = self._session_start_options(key)
        options.update(
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            static_summary=f"chat session **{key}**, branch of **{parent}** at {from_entry}",
            # Its settings are the parent's, which the session restores: only what is known here.
            static_details=branch_details(
                parent=parent, branch_point=from_entry, created_by=self.client.identity
            ),
            search_attributes=typed_attributes(
                {
                    sa.SESSION_KEY.name: key,
                    sa.PHASE.name: "idle",
                    # The parent's model and agent, which the branch keeps: found by them in
                    # `sessions --model` and the UI from the start, not after its first run.
                    **await self._parent_attributes(parent),
                }
            ),
            memo={MEMO_PARENT: parent, MEMO_BRANCH_POINT: from_entry},
        )
        start = WithStartWorkflowOperation(
            SessionWorkflow.run, SessionInput(state=state, fresh=True, branch=source), **options
        )
        call = asyncio.ensure_future(
            self.client.execute_update_with_start_workflow(
                SessionWorkflow.branch_ready, start_workflow_operation=start
            )
        )
        try:
            receipt: BranchReceipt = await self._answer_or_no_worker(call, WORKER_WAIT_SECONDS)
        except WorkflowAlreadyStartedError:
            raise BranchRejected(
                f"session {key} already exists; choose another key for the branch (--to)"
            ) from None
        except WorkflowUpdateFailedError as err:
            raise BranchRejected(_failure_text(err)) from err
        except RPCError as err:
            # The workflow ended before the update was taken: its failure says why.
            handle = self.client.get_workflow_handle(session_workflow_id(key))
            try:
                await handle.result()
            except WorkflowFailureError as failure:
                raise BranchRejected(_cause_text(failure)) from err
            raise
        except _NoAnswer as gave_up:
            raise NoWorker(
                f"branch {key} of {parent} started, but {gave_up.presence.describe()}: its "
                f"history is copied when a worker starts; {NO_WORKER_HINT}"
            ) from None
        return receipt

    async def _profile_note(self, profile: str, state: SessionState) -> str | None:
        """What is wrong with a new session's pinned profile, for its receipt: one of another
        provider (its key could never call the session's model), or one this client knows
        nothing of (not stored, not in the config, no key in this environment: the workers'
        environment may still hold its key, else the runs use the provider's other
        profiles)."""
        from activities.auth_store import AuthStore

        provider = state.settings.model.provider
        config = self._config()
        store = AuthStore.for_data_dir(self.settings.data_dir, declared=config.auth_profiles)
        known = await asyncio.to_thread(store.profiles)
        declared = config.auth_profiles.get(profile)
        owner = declared.provider if declared is not None else None
        if owner is None and profile in known:
            owner = known[profile].provider
        if owner is not None and owner != provider:
            return (
                f"warning: profile {profile} is a profile of {owner}, and the session's model "
                f"is {state.settings.model.label()}: its runs use the provider's other profiles"
            )
        if owner is not None:
            return None
        listed = sorted(pid for pid, p in known.items() if p.provider == provider)
        return (
            f"warning: no profile {profile} is stored or configured here (known for {provider}: "
            f"{', '.join(listed) or 'none'}); unless a worker's environment holds its key, the "
            "runs use the provider's other profiles"
        )

    async def _parent_attributes(self, parent: str) -> dict[str, str]:
        """A branch's parent's model and agent: from the running session, else from its last
        record in the store ({} when neither says)."""
        try:
            status = await self.status(parent)
            return {sa.MODEL.name: status.model, sa.AGENT.name: status.agent_id}
        except (SessionNotFound, RPCError, NoWorker):
            pass
        from activities.session_records import SessionRecords

        recorded = await asyncio.to_thread(
            run_sync, self.settings, lambda store: SessionRecords(store).recorded(parent)
        )
        if recorded is None:
            return {}
        settings = recorded[0]
        return {sa.MODEL.name: settings.model.label(), sa.AGENT.name: settings.agent_id}

    async def _key_taken(self, key: str) -> bool:
        """A running session, or a closed one whose transcript a new message would reopen."""
        if await self.session_exists(key):
            return True
        return bool(await asyncio.to_thread(self.transcript, key))

    async def _free_branch_key(self, parent: str) -> str:
        n = 1
        while await self._key_taken(branch_key(parent, n)):
            n += 1
        return branch_key(parent, n)

    async def subagent_root(self, key: str) -> str | None:
        """The top-level session a sub-agent's session was spawned under, at any depth (its
        run's root workflow); None for any other key, or one that never ran."""
        if SUBAGENT_SEGMENT not in key:
            return None
        try:
            desc = await self.client.get_workflow_handle(run_workflow_id(key, 1)).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        root = desc.root_id
        if not root or root == desc.id or not root.startswith("session:"):
            return None
        return session_key_from_workflow_id(root)

    async def session_tree(self) -> list[TreeNode]:
        """Every session the server remembers (running or closed), with where it was branched
        from (its workflow's memo: no query, no worker needed) and its resets (its transcript)."""
        from activities.branch_history import resets_of

        nodes: dict[str, TreeNode] = {}
        async for wf in self.client.list_workflows("WorkflowType = 'SessionWorkflow'"):
            try:
                key = session_key_from_workflow_id(wf.id)
            except ValueError:
                continue
            node = nodes.setdefault(key, TreeNode(key=key))
            started = wf.start_time.timestamp() if wf.start_time else 0.0
            if started >= node.started:
                # The chain's newest execution says whether the session runs now.
                node.started = started
                running = wf.status == WorkflowExecutionStatus.RUNNING
                node.status = "running" if running else "closed"
            if node.parent_session is None:
                try:
                    memo = await wf.memo()
                except Exception:
                    memo = {}  # undecodable (e.g. encrypted with a key this client lacks)
                parent = memo.get(MEMO_PARENT)
                if isinstance(parent, str):
                    node.parent_session = parent
                    point = memo.get(MEMO_BRANCH_POINT)
                    node.branch_point = point if isinstance(point, str) else None
        await self._subagent_nodes(nodes)
        for node in nodes.values():
            node.resets = resets_of(await self.read_transcript(node.key))
        return sorted(nodes.values(), key=lambda n: (n.started, n.key))

    async def _subagent_nodes(self, nodes: dict[str, TreeNode]) -> None:
        """Sub-agent sessions (SPEC §13.4) have no session workflow: their run is a child of
        the run that spawned them, which places them under its session."""
        query = "WorkflowType = 'AgentRunWorkflow' AND WorkflowId STARTS_WITH 'session:agent:'"
        async for wf in self.client.list_workflows(query):
            key = session_key_from_workflow_id(wf.id)
            if SUBAGENT_SEGMENT not in key or not wf.parent_id:
                continue
            running = wf.status == WorkflowExecutionStatus.RUNNING
            status = wf.status.name.lower() if wf.status and not running else "running"
            if status == "failed" and wf.typed_search_attributes.get(sa.LAST_ERROR_KEY) == (
                ExecutionErrorKind.ABORTED.value
            ):
                # An aborted run fails its workflow (so the UI does not show it completed);
                # listed, it is the abort it was, not a failure to look into.
                status = "aborted"
            nodes[key] = TreeNode(
                key=key,
                status=status,
                started=wf.start_time.timestamp() if wf.start_time else 0.0,
                parent_session=session_key_from_workflow_id(wf.parent_id),
                spawned_by=wf.parent_id,
            )

    async def _running_session(self, key: str) -> WorkflowHandle[Any, Any]:
        handle = self.client.get_workflow_handle(session_workflow_id(key))
        try:
            desc = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and SUBAGENT_SEGMENT in key:
                # Its run is a child of the run that spawned it; there is no session workflow.
                raise SessionNotFound(
                    f"{key} is a sub-agent's session: its run is a child of the run that "
                    f"spawned it, not a session of its own; follow it with `agentlane watch "
                    f"{key}`, read it with `agentlane transcript {key}`, or see the session "
                    "that spawned it (`agentlane sessions tree`)"
                ) from err
            if err.status == RPCStatusCode.NOT_FOUND:
                raise SessionNotFound(f"session {key} does not exist") from err
            raise
        if desc.status != WorkflowExecutionStatus.RUNNING:
            raise SessionNotFound(
                f"session {key} does not exist any more (it was "
                f"{desc.status.name.lower() if desc.status else 'closed'}); "
                "a new message to it starts it again"
            )
        return handle

    # -- observing --------------------------------------------------------------------------

    async def status(
        self, session_key: str, on_wait: Callable[[str], None] | None = None
    ) -> SessionStatus:
        """The session's state (a query: a worker answers it). With no worker polling, or a busy
        one that does not answer within its bound, `NoWorker` / `WorkerBusy` say which."""
        key = check_session_key(session_key)
        handle = await self._running_session(key)
        call = asyncio.ensure_future(handle.query(SESSION_STATUS_QUERY, result_type=SessionStatus))
        try:
            status: SessionStatus = await self._answer_or_no_worker(
                call, WORKER_WAIT_SECONDS, on_wait
            )
        except _NoAnswer as gave_up:
            raise _no_worker(key, gave_up.presence) from None
        if status.current_run_id:
            progress = await self.run_progress(status.current_run_id)
            if progress is not None:
                phase = {
                    "streaming": SessionPhase.STREAMING,
                    "compacting": SessionPhase.COMPACTING,
                    "waiting": SessionPhase.WAITING,
                }.get(progress.phase.value, SessionPhase.RUNNING)
                waiting_until, waiting_reason = progress.waiting_until, progress.waiting_reason
                asking = [a.expires_at for a in status.approvals if a.root_run_id]
                if asking and phase != SessionPhase.WAITING:
                    # A sub-agent of the run waits for a person: so does the run.
                    phase, waiting_reason, waiting_until = (
                        SessionPhase.WAITING,
                        "approval",
                        min(asking),
                    )
                status = status.model_copy(
                    update={
                        "phase": phase,
                        "turns": status.turns + progress.turn_index,
                        "usage": status.usage.plus(progress.usage),
                        "profile_id": progress.profile_id,
                        "rotations": progress.rotations,
                        "thinking": progress.thinking or status.thinking,
                        "waiting_until": waiting_until,
                        "waiting_reason": waiting_reason,
                        "fallback_model": progress.fallback_model,
                    }
                )
        if status.webhook is not None and status.webhook.pending_runs:
            status = status.model_copy(
                update={"webhook": await self._webhook_attempts(handle, status.webhook)}
            )
        return status

    async def session_tools(
        self, session_key: str, *, routing: Routing | None = None, sender: str | None = None
    ) -> ToolReport:
        """The tools the session's next run is offered (SPEC §13.3), computed as the run does
        from this deployment's config, the session's agent and model, and the routing and
        sender of the message that would start it; and which layer removed each of the others.
        A session that does not exist is shown as a new one would be."""
        from workflows.policy.tool_policy import select_tools

        key = check_session_key(session_key)
        try:
            status = await self.status(key)
            exists, agent_id, model = True, status.agent_id, status.model
        except SessionNotFound:
            exists, agent_id, model = False, "main", self._default_model("main")
        config = self._config()
        try:
            agent: AgentTools | None = config.agent(agent_id).tool_rules()
        except UnknownAgentError:
            agent = None
        routing = routing or Routing()
        policy = policy_input(config.tools, agent, agent_id, routing, sender)
        provider, _, name = model.partition("/")
        tools = ExecutionRequest.model_fields["tools"].get_default(call_default_factory=True)
        selection = select_tools(tools, policy, provider, name, [sender])
        return ToolReport(
            session_key=key,
            session_exists=exists,
            agent_id=agent_id,
            model=model,
            routing=routing,
            sender=sender,
            offered=selection.offered,
            removed=selection.removed,
            unknown_entries=selection.unknown_entries,
        )

    async def _webhook_attempts(
        self, handle: WorkflowHandle[Any, Any], hook: WebhookStatus
    ) -> WebhookStatus:
        """The delivery activity's retry state as Temporal holds it (attempt, last failure,
        next attempt): read with `describe`, which costs no history."""
        try:
            described = await handle.describe()
        except RPCError:
            return hook
        for pending in described.raw_description.pending_activities:
            if pending.activity_type.name != DELIVER_WEBHOOKS:
                continue
            update: dict[str, Any] = {"attempt": pending.attempt}
            if pending.HasField("last_failure") and pending.last_failure.message:
                update["last_error"] = await self._failure_text(pending.last_failure)
            if pending.HasField("next_attempt_schedule_time"):
                update["next_attempt_at"] = pending.next_attempt_schedule_time.ToSeconds()
            return hook.model_copy(update=update)
        return hook

    async def _failure_text(self, failure: Failure) -> str:
        """A failure as Temporal holds it, decoded: with payload encryption its message is in
        the encoded attributes and the plain field reads "Encoded failure"."""
        try:
            decoded = await self.client.data_converter.decode_failure(failure)
        except Exception:  # a key this client lacks: the stored words are all there is
            return failure.message
        return getattr(decoded, "message", None) or str(decoded) or failure.message

    async def run_progress(self, run_id: str) -> RunProgress | None:
        try:
            result: RunProgress = await self.client.get_workflow_handle(run_id).query(
                RUN_PROGRESS_QUERY, result_type=RunProgress
            )
            return result
        except RPCError:
            return None

    async def wait_for_run(self, run_id: str) -> ExecutionResult:
        """The run's result, once the session has also recorded its end (so a message sent next
        starts a new run at once instead of queueing behind the finished one). A run a receipt
        named that Temporal has not made yet (its session is starting it) is waited for, up to
        `RUN_CREATED_WAIT`; an id no run ever gets fails after that."""
        handle = self.client.get_workflow_handle(run_id, result_type=ExecutionResult)
        result = await self._run_result(handle)
        session = self.client.get_workflow_handle(session_workflow_id(result.session_key))
        # The session records the end a task after the run closes: asked again at growing
        # intervals, so a loaded deployment is not asked more the slower it gets.
        pause, deadline = 0.02, time.monotonic() + RUN_END_RECORDED_WAIT
        while True:
            try:
                status: SessionStatus = await session.query(
                    SESSION_STATUS_QUERY, result_type=SessionStatus
                )
            except RPCError:
                break
            if status.current_run_id != run_id or time.monotonic() >= deadline:
                break
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.5)
        return result

    async def _run_result(self, handle: WorkflowHandle[Any, ExecutionResult]) -> ExecutionResult:
        created_by = time.monotonic() + RUN_CREATED_WAIT
        pause = 0.02
        while True:
            try:
                result: ExecutionResult = await handle.result()
                return result
            except WorkflowFailureError as err:
                # A run that ended in error or was aborted fails its workflow with its result
                # (agentlane/run_outcome.py); any other failure (terminated, timed out) is
                # raised.
                failed = result_of_failure(err)
                if failed is not None:
                    return failed
                return await self._ended_in_temporal(handle, err)
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND or time.monotonic() >= created_by:
                    raise
                await asyncio.sleep(pause)
                pause = min(pause * 2, 0.5)

    async def _ended_in_temporal(
        self, handle: WorkflowHandle[Any, ExecutionResult], err: WorkflowFailureError
    ) -> ExecutionResult:
        """A run terminated or timed out in Temporal has no result of its own: what happened,
        as a result (its session announced the end and queues its messages again)."""
        described = await handle.describe()
        status = described.status
        how = (
            {
                WorkflowExecutionStatus.TERMINATED: "terminated",
                WorkflowExecutionStatus.TIMED_OUT: "timed out",
                WorkflowExecutionStatus.CANCELED: "cancelled",
            }.get(status)
            if status is not None
            else None
        )
        if how is None:
            raise err
        cause = err.cause
        why = str(getattr(cause, "message", "") or "") if cause is not None else ""
        started = described.start_time
        return ended_in_temporal(
            session_key_from_workflow_id(handle.id),
            handle.id,
            how,
            why,
            started,
            described.close_time or started,
        )

    async def events_offset(self, session_key: str) -> int:
        """The offset the session's next event will have: 0 for a session not started yet (its
        event stream starts with its first message), so `watch(key, offset)` sees everything."""
        stream = WorkflowStreamClient.create(
            self.client, events_workflow_id(check_session_key(session_key))
        )
        try:
            return await stream.get_offset()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return 0
            raise

    async def watch(
        self,
        session_key: str,
        from_offset: int = 0,
        until_run: str | None = None,
        poll_cooldown_ms: int = 50,
        repeats: bool = False,
    ) -> AsyncIterator[StreamItem]:
        """Events from `from_offset` on; stops after `until_run`'s agent_end when given.

        Survives server restarts and reconnects: it resumes from the last offset it delivered.
        An event the stream holds twice is passed on once (agentlane/seen_events.py), unless
        `repeats` (a reader that filters them itself and must see every offset: the gateway).
        """
        if from_offset < 0:
            # Taken on, it read as events lost before the stream's first.
            raise ValueError(f"offset {from_offset} is before the stream's first event (0)")
        from datetime import timedelta

        offset = from_offset
        seen = SeenEvents()
        if until_run is not None and await self._ended_before(session_key, until_run, offset):
            return  # e.g. the run a redelivered message's original took, long over
        while True:
            # Polls through a handle that moves to the stream's next segment at once when the
            # hand-over refuses them (clients/stream_handover.py).
            stream = WorkflowStreamClient(
                HandOverAwareHandle(self.client, events_workflow_id(session_key)),
                client=self.client,
            )
            try:
                end = await stream.get_offset() if offset else 0
                if offset > end:
                    # No stream gave that offset out (a reopened session's stream goes on from
                    # the old one's end): wait at the live end, never replay from 0.
                    offset = end
                async for item in stream.subscribe(
                    [EVENTS_TOPIC],
                    from_offset=offset,
                    result_type=AgentEvent,
                    poll_cooldown=timedelta(milliseconds=poll_cooldown_ms),
                ):
                    if item.offset > offset:
                        # The stream no longer holds what was asked for (it keeps recent events;
                        # a closed session's are gone): said, as the gateway's `gap` says it.
                        yield StreamItem(item.offset - 1, gap_notice(session_key, offset, item))
                    offset = item.offset + 1
                    if not repeats and not seen.first_time(item.data.event_id, item.data.kind):
                        continue  # the same event again (agentlane/seen_events.py)
                    yield StreamItem(item.offset, item.data)
                    if (
                        until_run is not None
                        and item.data.run_id == until_run
                        and item.data.kind in (EventKind.AGENT_END,)
                    ):
                        return
                return
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    await asyncio.sleep(0.5)  # the session's stream is starting
                    continue
                if err.status == RPCStatusCode.FAILED_PRECONDITION:
                    # The poll met the stream's hand-over to its next segment (its task was
                    # failed and is being retried): resume at once, before the items carried
                    # over are left behind.
                    await asyncio.sleep(0.05)
                    continue
                await asyncio.sleep(1.0)  # the server is unreachable: reconnect and resume
            except (ConnectionError, OSError):
                await asyncio.sleep(1.0)

    async def _ended_before(self, session_key: str, run_id: str, from_offset: int) -> bool:
        """Whether run `run_id` is over and its agent_end is not at or after `from_offset`
        (so a watch for it from there would wait forever)."""
        from temporalio.client import WorkflowExecutionStatus

        try:
            described = await self.client.get_workflow_handle(run_id).describe()
        except RPCError:
            return False
        if described.status in (None, WorkflowExecutionStatus.RUNNING):
            return False
        async for item in self.read_events(session_key, from_offset):
            if item.event.run_id == run_id and item.event.kind == EventKind.AGENT_END:
                return False
        return True

    async def read_events(
        self, session_key: str, from_offset: int, until: int | None = None
    ) -> AsyncIterator[StreamItem]:
        """The retained events from `from_offset` (up to `until`, exclusive), read with the
        stream's poll *query*: no history on any workflow, unlike `watch`'s long-poll updates.
        Stops at the stream's current end. An offset the stream no longer holds is clamped to
        its oldest item (the caller sees the jump). Retries while the server is unreachable
        (up to `READ_RETRY_SECONDS`)."""
        import base64

        from temporalio.api.common.v1 import Payload
        from temporalio.contrib.workflow_streams import PollInput, PollResult

        from activities.event_publishing import POLL_QUERY

        handle = self.client.get_workflow_handle(events_workflow_id(session_key))
        converter = self.client.data_converter.payload_converter
        offset = from_offset
        failing_since: float | None = None
        while until is None or offset < until:
            try:
                result = await handle.query(
                    POLL_QUERY,
                    PollInput(topics=[EVENTS_TOPIC], from_offset=offset),
                    result_type=PollResult,
                )
            except RPCError as err:
                if err.status == RPCStatusCode.NOT_FOUND:
                    return  # no stream (yet): nothing to read
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since > READ_RETRY_SECONDS:
                    raise
                await asyncio.sleep(1.0)
                continue
            failing_since = None
            for wire in result.items:
                if until is not None and wire.offset >= until:
                    return
                payload = Payload()
                payload.ParseFromString(base64.b64decode(wire.data))
                yield StreamItem(wire.offset, converter.from_payload(payload, AgentEvent))
            if not result.more_ready or result.next_offset <= offset:
                return
            offset = result.next_offset

    async def list_sessions(self, filters: SessionFilter | None = None) -> list[dict[str, object]]:
        """Running sessions (`filters`: those its search attributes match; see
        agentlane/session_query.py), with their phase, model, totals and last error."""
        return (await self.find_sessions(filters or SessionFilter())).rows

    async def find_sessions(self, filters: SessionFilter) -> SessionListing:
        """`list_sessions`, and the visibility queries it ran (what the UI's search box takes)."""
        listing = SessionListing()
        keys: set[str] | None = None
        # A session's own phase is idle or running; that its run waits (a cooling profile, an
        # approval) or compacts only the run says: shown from the run, as `status` shows it.
        run_phases: dict[str, str] = {}
        runs = filters.runs_query()
        if runs is not None:
            listing.queries.append(runs)
            keys = set()
            async for wf in self.client.list_workflows(runs):
                key = wf.typed_search_attributes.get(sa.SESSION_KEY_KEY)
                if key is not None:
                    keys.add(key)
                    phase = wf.typed_search_attributes.get(sa.PHASE_KEY)
                    if phase in RUN_PHASES:
                        run_phases[key] = phase
        query = filters.sessions_query(keys)
        if query is None:
            return listing
        listing.queries.append(query)
        seen: set[str] = set()
        async for wf in self.client.list_workflows(query):
            if wf.id in seen:
                continue
            seen.add(wf.id)
            values = read_attributes(wf.typed_search_attributes)
            listing.rows.append(
                {
                    "key": session_key_from_workflow_id(wf.id),
                    "workflow_id": wf.id,
                    "started": wf.start_time.isoformat() if wf.start_time else "",
                    "status": wf.status.name if wf.status else "",
                    "phase": values[sa.PHASE.name],
                    "model": values[sa.MODEL.name],
                    "agent": values[sa.AGENT.name],
                    "channel": values[sa.CHANNEL.name],
                    "turns": values[sa.TURNS.name],
                    "tokens": values[sa.TOKENS.name],
                    "cost_usd": values[sa.COST.name],
                    "last_error": values[sa.LAST_ERROR.name],
                }
            )
        if runs is None and any(row["phase"] == "running" for row in listing.rows):
            async for wf in self.client.list_workflows(RUNS_WAITING_OR_COMPACTING):
                key = wf.typed_search_attributes.get(sa.SESSION_KEY_KEY)
                phase = wf.typed_search_attributes.get(sa.PHASE_KEY)
                if key is not None and phase in RUN_PHASES:
                    run_phases[key] = phase
        for row in listing.rows:
            if row["phase"] == "running" and row["key"] in run_phases:
                row["phase"] = run_phases[str(row["key"])]
        return listing

    async def session_ever_existed(self, session_key: str) -> bool:
        """Whether a session with this key was ever started (it may be closed now)."""
        handle = self.client.get_workflow_handle(_presence_workflow_id(session_key))
        try:
            await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def session_exists(self, session_key: str) -> bool:
        handle = self.client.get_workflow_handle(_presence_workflow_id(session_key))
        try:
            desc = await handle.describe()
        except RPCError:
            return False
        return desc.status == WorkflowExecutionStatus.RUNNING

    def transcript(self, session_key: str) -> list[TranscriptEntry]:
        """Read the transcript from the store (`AGENTLANE_DATABASE_URL`, else the data dir's)."""
        from activities.transcript_store import TranscriptStore

        key = check_session_key(session_key)
        return run_sync(self.settings, lambda store: TranscriptStore(store).read_all(key))

    async def read_transcript(self, session_key: str) -> list[TranscriptEntry]:
        """`transcript` from async code, on this process's shared store."""
        from activities.transcript_store import TranscriptStore

        key = check_session_key(session_key)
        return await TranscriptStore(await shared_store(self.settings)).read_all(key)

    # -- scheduled runs (issue 12; clients/schedules.py) ---------------------------------------

    async def create_schedule(
        self,
        schedule_id: str,
        session_key: str,
        text: str,
        *,
        cron: str | None = None,
        every: str | None = None,
        overlap: str = "skip",
        catchup_window: str | None = None,
        paused: bool = False,
        note: str | None = None,
        workspace: str | None = None,
        model: str | None = None,
    ) -> ScheduleView:
        """Send `text` to `session_key` on a cron string or every interval (`30s`, `1h`...);
        each firing's run has source `cron`. See `clients/schedules.py` for the rules."""
        if workspace is not None:
            if not await asyncio.to_thread(Path(workspace).is_dir):
                raise ScheduleRejected(f"workspace {workspace} does not exist or is not a folder")
            workspace = str(await asyncio.to_thread(Path(workspace).resolve))
        if model is not None:
            try:
                self._config().model(model)
            except ConfigError as err:
                raise ScheduleRejected(str(err)) from err
        return await schedules.create_schedule(
            self.client,
            self.settings.workflow_task_queue,
            schedule_id,
            session_key,
            text,
            cron=cron,
            every=every,
            overlap=overlap,
            catchup_window=catchup_window,
            paused=paused,
            note=note,
            workspace=workspace,
            model=model,
            # The folder was checked on this client's disk: its firings pin the session here.
            workspace_host=(
                self.settings.host_id
                if workspace is not None and self.settings.workspaces == "host"
                else None
            ),
        )

    async def list_schedules(self) -> list[ScheduleSummary]:
        return await schedules.list_schedules(self.client, self.settings.workflow_task_queue)

    async def describe_schedule(self, schedule_id: str, *, outcomes: bool = True) -> ScheduleView:
        return await schedules.describe_schedule(self.client, schedule_id, outcomes=outcomes)

    async def pause_schedule(self, schedule_id: str, note: str | None = None) -> None:
        await schedules.pause_schedule(self.client, schedule_id, note)

    async def unpause_schedule(self, schedule_id: str, note: str | None = None) -> None:
        await schedules.unpause_schedule(self.client, schedule_id, note)

    async def trigger_schedule(self, schedule_id: str) -> None:
        await schedules.trigger_schedule(self.client, schedule_id)

    async def delete_schedule(self, schedule_id: str) -> None:
        await schedules.delete_schedule(self.client, schedule_id)


def _quiet_sdk_core() -> None:
    """The SDK's core logs each gRPC retry as a coloured WARN line on the terminal (a server
    restarting mid-`send` wrote dozens into the user's output); the CLI says what matters in
    its own words, so the core keeps its errors only."""
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    quiet = TelemetryConfig(
        logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    )
    Runtime.set_default(Runtime(telemetry=quiet), error_if_already_set=False)


def _presence_workflow_id(session_key: str) -> str:
    """The workflow whose existence says a session is there: its session workflow, or for a
    sub-agent (a child run, with no session workflow of its own) its event stream, which is
    what watchers follow."""
    if SUBAGENT_SEGMENT in session_key:
        return events_workflow_id(session_key)
    return session_workflow_id(session_key)


# How the server words an update it dropped because no worker processed the task carrying it.
UNPROCESSED_UPDATE = "wasn't processed by worker"
NOT_READY = "Workflow Task in failed state"


def _retryable(err: RPCError) -> bool:
    if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
        return True
    if err.status == RPCStatusCode.FAILED_PRECONDITION:
        # The session's last workflow task timed out on an overloaded worker (or failed) and is
        # being retried: the server takes no update until one succeeds, and this one was not
        # taken. A send keeps trying within its busy wait, then is handed over as a signal.
        return NOT_READY in err.message
    return err.status == RPCStatusCode.UNAVAILABLE and "update was aborted" in err.message


def _own_duplicate(receipt: SendReceipt) -> SendReceipt:
    """A send retried after its update was aborted may find that the first try got through:
    report that acceptance, not a duplicate."""
    original = receipt.original
    if receipt.disposition != SendDisposition.DUPLICATE or original is None:
        return receipt
    disposition = {
        FateState.STARTED: SendDisposition.STARTED,
        FateState.STEERED: SendDisposition.STEERED,
        # Never `queued` for a message the session has dropped since (issue 19).
        FateState.DROPPED: SendDisposition.DROPPED,
    }.get(original.state, SendDisposition.QUEUED)
    return receipt.model_copy(
        update={
            "message_seq": original.seq,
            "disposition": disposition,
            "run_id": original.run_id,
            "duplicate_of": None,
            "original": None,
            "note": "accepted on an earlier try of this send",
        }
    )


def _no_worker(key: str, presence: WorkerPresence | None = None) -> NoWorker:
    if presence is not None and presence.polling:
        return WorkerBusy(
            f"session {key} exists, but {presence.describe()} and did not answer within "
            f"{WORKER_WAIT_SECONDS + BUSY_WAIT_SECONDS:.0f} s; try again later"
        )
    why = presence.describe() if presence is not None else "no worker answered"
    return NoWorker(f"session {key} exists, but {why}; {NO_WORKER_HINT}")


def _queue_options(queue: QueueOptions | str | None) -> QueueOptions | None:
    if not isinstance(queue, str):
        return queue
    parsed = parse_queue_directive(queue)
    if parsed == "reset":
        raise ValueError("`reset` changes a session's settings; it is not an option of a message")
    return parsed


def _failure_text(err: WorkflowUpdateFailedError) -> str:
    return _cause_text(err)


def _cause_text(err: WorkflowUpdateFailedError | WorkflowFailureError) -> str:
    cause: BaseException | None = err.cause
    parts: list[str] = []
    while cause is not None:
        text = getattr(cause, "message", None) or str(cause)
        if text and text not in parts:
            parts.append(text)
        cause = cause.__cause__
    return ": ".join(parts) or "message rejected"
