"""SessionWorkflow: one long-lived workflow per chat session (id `session:<key>`).

It is the session lane: at most one AgentRunWorkflow child at a time. Messages arrive as a
validated update (`send`, answered as soon as the message is in the session's state) or, when no
worker answers, as a durable signal (`enqueue`). What happens to a message that arrives while a
run is busy is decided by the queue policy (`workflows/policy/queue.py`, SPEC §17): steer it into
the run, queue it (under the cap and its drop policy), or interrupt the run. A run holds its
messages until it ends normally; a run that ends abnormally gives them back. `abort_run` stops
the run in flight at its next safe point. The session continues as new between runs when
Temporal suggests it, carrying only its compact state.

`reset` starts the session afresh (issue 10): a busy run is aborted and waited for, then a reset
marker is written to the transcript (nothing before it is sent to the model again) before any
queued message runs. A session started with `SessionInput.branch` is a branch of another: its
first step copies the parent's history up to the branch point (`branch_ready` answers once it
is there). Neither needs a patch: their code runs only for an update or an input field that
histories recorded before them never contain.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import TypedSearchAttributes
from temporalio.contrib.workflow_streams import WorkflowStreamState
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from agentlane import search_attributes as sa
    from agentlane.announcements import PUBLISH_ANNOUNCEMENTS, PublishInput
    from agentlane.approvals import (
        ApprovalClosed,
        ApprovalDecision,
        ApprovalOutcome,
        ApprovalReceipt,
        PendingApproval,
    )
    from agentlane.branches import (
        COPY_BRANCH,
        MEMO_BRANCH_POINT,
        MEMO_PARENT,
        RESET_SESSION,
        BranchCopied,
        BranchCopyInput,
        BranchReceipt,
        ResetInput,
        ResetReceipt,
        ResetRequest,
        ResetWritten,
        branch_entry_id,
        reset_entry_id,
        reset_note,
    )
    from agentlane.errors import ExecutionErrorKind
    from agentlane.event_stream import EventsInput
    from agentlane.events import Announcement, EventKind
    from agentlane.ids import chain_token_of, events_workflow_id, run_workflow_id
    from agentlane.messages import (
        SESSION_ENDING,
        AbortReceipt,
        AbortRequest,
        FateState,
        InboundMessage,
        MessageFate,
        ModelSwitch,
        QueueMode,
        Routing,
        SendDisposition,
        SendReceipt,
        UnknownQueueMode,
        check_inbound,
        parse_queue_mode,
    )
    from agentlane.pricing import cost_label
    from agentlane.profile_state import ProfilePin
    from agentlane.queue_drops import (
        RECORD_DROPPED_MESSAGES,
        DroppedMessage,
        RecordDropsInput,
        RecordDropsResult,
        drop_note,
    )
    from agentlane.queue_settings import (
        DedupeMode,
        DropPolicy,
        OverflowState,
        QueueChange,
        QueueOptions,
        QueueSettings,
    )
    from agentlane.reasoning_modes import reasoning_mode_problem
    from agentlane.redaction import redact
    from agentlane.run import (
        EntrySource,
        ExecutionError,
        ExecutionRequest,
        ExecutionResult,
        ExecutionStatus,
        ModelRef,
        RunInput,
        StartAborted,
        TerminationReason,
        UserTurn,
    )
    from agentlane.run_outcome import last_run_line, result_of_failure
    from agentlane.run_records import RUN_SPENT, RunSpent, RunSpentInput
    from agentlane.search_attribute_values import Values, typed
    from agentlane.session import (
        BranchSource,
        HeldAbort,
        InFlight,
        QueuedMessage,
        SessionInput,
        SessionPhase,
        SessionState,
        SessionStatus,
    )
    from agentlane.session_records import (
        RECORD_SESSION,
        RESTORE_SESSION,
        RecordSessionInput,
        RestoredSession,
        RestoreSessionInput,
        SessionTotals,
    )
    from agentlane.static_details import run_details as run_static_details
    from agentlane.task_priority import EVENTS_PRIORITY, RUN_PRIORITY
    from agentlane.thinking_levels import normalize_thinking_level
    from agentlane.ui_text import plain
    from agentlane.webhooks import RunDeliveryInfo, WebhookState
    from workflows import activity_options as opts
    from workflows.agent_run import AgentRunWorkflow
    from workflows.patches import (
        ABNORMAL_END_TOLD_PATCH,
        BOUNDED_FATES_PATCH,
        CAP_BY_AGE_PATCH,
        CLOSING_TAKES_PATCH,
        EVENTS_CODE,
        PROMPT_DEDUPE_PATCH,
        QUEUE_ORDER_PATCH,
        RUN_CODE,
        RUN_SPENT_PATCH,
        SESSION_CODE,
        SETTLED_WAIT_PATCH,
        STEER_BACKLOG_COPY_PATCH,
        STOP_ON_HOST_PATCH,
        Patches,
        newest,
    )
    from workflows.policy import run_details
    from workflows.policy import search_attributes as attributes
    from workflows.policy.abort_hold import (
        AbortTarget,
        abort_note,
        abort_target,
        held_run_queue,
        held_upto,
    )
    from workflows.policy.approvals import closed_after, decision_problem
    from workflows.policy.context_guard import message_too_large
    from workflows.policy.fates import forgotten, kept, settled
    from workflows.policy.history_rollover import HistoryBounds, rollover_due
    from workflows.policy.idle_limit import idle_limit_seconds
    from workflows.policy.provider_window import merged_windows
    from workflows.policy.queue import (
        Action,
        Batch,
        after_steer,
        apply_cap,
        backlog_copy,
        check_duplicate,
        debounce_remaining_ms,
        decide,
        drop_fate,
        drops_to_record,
        interrupt_ahead,
        item_debounce_ms,
        next_batch,
        overflow_after_run,
        recent_key,
        remember,
        remove,
        resolve_settings,
        seq_of,
        unconsumed_to_requeue,
        with_interrupt,
        with_requeued,
    )
    from workflows.policy.redelivery import MAX_RUN_ATTEMPTS, after_abnormal_end
    from workflows.process_stop import stop_background_processes
    from workflows.search_attribute_upserts import SEARCH_ATTRIBUTES_PATCH, current, upsert
    from workflows.session_events import SessionEventsWorkflow
    from workflows.telemetry import WorkflowMetrics, message_span, since, traceparent
    from workflows.webhook_queue import WEBHOOK_PATCH, WebhookQueue, run_end_of, target_of

RECENT_MESSAGE_IDS = 500
# Fates kept for `wait_started` by sessions recorded before BOUNDED_FATES_PATCH.
RECENT_FATES = 1000
# `send` answers as soon as the message is in the session's state; code before this patch
# waited for the message's run to start (holding one of the workflow's few in-flight updates).
ACCEPT_ON_ENQUEUE_PATCH = "send-returns-on-accept"
# A chain started by a client restores what an earlier incarnation of its key recorded.
RESTORE_PATCH = "restore-session-on-reopen"
SESSION_RECORD_TIMEOUT = timedelta(seconds=30)
RECORD_ON_CLOSE_PATCH = "record-session-on-close"
# Continue as new between runs even while messages wait (a burst must not grow history forever).
HANDOVER_WITH_QUEUE_PATCH = "continue-as-new-with-queue"
# Writing a reset marker, copying a branch: local file work, retried on transient errors, bounded
# so a broken store fails the reset or the branch with its reason instead of hanging it.
TREE_STEP_TIMEOUT = timedelta(seconds=60)
TREE_STEP_DEADLINE = timedelta(minutes=3)
# Messages the queue policy drops are written to the transcript and announced (issue 19), and
# `drop:new` turns a newcomer away instead of queueing it over the cap. Older histories did
# neither.
RECORD_DROPS_PATCH = "record-dropped-messages"
# A batch of dropped messages that could not be recorded is tried again after this long (they
# stay in the session's state meanwhile).
DROP_RECORD_RETRY = timedelta(seconds=10)
# An abort that lands after a message was answered `started` but before its run is made is held
# for that run (workflows/policy/abort_hold.py); older code answered "nothing to abort".
HOLD_ABORT_PATCH = "hold-abort-for-announced-run"
# A session continues as new between runs once its history reaches either bound (about 20 runs
# of 23 events), not only when Temporal suggests it (4 096 events): a worker holds each cached
# session's state machines in memory, and one that falls out of the cache (or whose task timed
# out on a busy worker) is replayed from its first event. Measured (bench_soak): 253 events
# replay in 330-400 ms on the 2 shared cores at load 17, so 500 stays under a second. Older
# histories continued only on the suggestion.
EARLY_ROLLOVER_PATCH = "session-early-rollover"
ROLLOVER_EVENTS = 500
ROLLOVER_BYTES = 256 * 1024
# `wait_started` calls one session holds open until their message's fate settles
# (SETTLED_WAIT_PATCH). Temporal bounds the updates in flight per workflow (10 by default on a
# cluster): past this many, a caller is answered `pending` at once and asks again later, so
# waiting callers never crowd out sends and aborts.
MAX_START_WAITERS = 4


# Enough of a prompt for a summary line, and for a secret it starts with to be recognised whole.
PREVIEW_SOURCE_CHARS = 2000


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        # Which changes are in force: the level its input names, else one marker, first
        # (workflows/patches.py).
        self.patches = Patches(SESSION_CODE)
        self.patches.start(inp.code)
        self.bounded_fates = self.patches(BOUNDED_FATES_PATCH)
        self.settled_waits = self.patches(SETTLED_WAIT_PATCH)
        self.backlog_copies = self.patches(STEER_BACKLOG_COPY_PATCH)
        # `wait_started` calls waiting for their message's fate to settle.
        self.start_waiters = 0
        self.s: SessionState = inp.state
        self.child: ChildWorkflowHandle[AgentRunWorkflow, ExecutionResult] | None = None
        self.current_run_id: str | None = None
        # The run the session's page shows as running: its number, id and start.
        self.run_shown: tuple[int, str, float] | None = None
        self.started: dict[int, str] = {}
        self.closing = False
        # Closed, its queue drained: the session is ending (a message now opens a new one).
        self.finalizing = False
        # A message sent after `close` joins the queue the close waits for (False: sessions
        # recorded before, which refused it).
        self.closing_takes_messages = False
        # Continue as new by size too (EARLY_ROLLOVER_PATCH), set as the run starts.
        self.bounded = False
        # Set just before continue-as-new: `wait_started` callers get `pending` and ask again.
        self.handing_over = False
        # An abort that arrived while the run's child was being started.
        self.abort_pending: str | None = None
        self.abort_pending_by: str | None = None
        # Messages taken in that wait for a reopened session's settings (`_accept`).
        self.accepting = 0
        # Messages wait until a reopened session's settings are restored.
        self.ready = not inp.fresh
        # Resets accepted and not finished: no run starts meanwhile. And one at a time.
        self.resets_pending = 0
        self.resetting = False
        # A branch being made (`inp.branch`): its receipt once copied, or why it could not be.
        self.branch_source: BranchSource | None = inp.branch
        self.branch_receipt: BranchReceipt | None = None
        self.branch_error: str | None = None
        # Webhook delivery (issue 11, workflows/webhook_queue.py): once a message named a
        # callback URL.
        self.hooks: WebhookQueue | None = (
            WebhookQueue(self.s.key, self.s.webhook) if self.s.webhook is not None else None
        )
        # Whether runs start with search attributes and the session upserts its own (every
        # session recorded since); None until the first run of this workflow run asks.
        self.upserts_attributes: bool | None = None
        self.metrics = WorkflowMetrics()
        # When the abort of the run in flight was accepted (workflow time): its latency is
        # measured to the run's end.
        self.abort_since: float | None = None
        # Whether dropped messages are recorded (RECORD_DROPS_PATCH); None until the first drop.
        self.records_drops: bool | None = None
        self.keeps_queue_order: bool | None = None
        # A batch of dropped messages is being written (a handover waits for it).
        self.recording_drops = False
        self.drops_task: asyncio.Task[None] | None = None
        # Approvals whose decision is on its way to the run.
        self.deciding: set[str] = set()

    # -- messages in ------------------------------------------------------------------------

    def _queue_settings(self, msg: InboundMessage | None = None) -> QueueSettings:
        """SPEC §17.2: the message's own settings, then the session's override, then the
        channel's, then the global ones; re-resolved for every message."""
        inline: QueueOptions | None = None
        if msg is not None and (msg.mode or msg.queue):
            inline = (msg.queue or QueueOptions()).model_copy(
                update={"mode": parse_queue_mode(msg.mode)} if msg.mode else {}
            )
        channel = msg.routing.channel if msg is not None else None
        return resolve_settings(inline, self.s.queue_override, self.s.settings.queue, channel)

    @workflow.update
    async def send(self, msg: InboundMessage) -> SendReceipt:
        return await self._traced_accept(msg)

    @workflow.signal
    async def enqueue(self, msg: InboundMessage) -> None:
        """The durable way in when no worker answers an update: a signal is in history the moment
        the server takes it. The client has run the same checks (`check_inbound`) already."""
        try:
            self._check_message(msg)
            if not self._records_drops():
                self._check_room(msg)
        except ValueError as err:
            workflow.logger.warning("message not accepted: %s", err)
            return
        try:
            await self._traced_accept(msg)
        except ApplicationError as err:  # a branch that could not be made takes no messages
            workflow.logger.warning("message not accepted: %s", err)

    async def _traced_accept(self, msg: InboundMessage) -> SendReceipt:
        """Accept a message inside its own span (tracing on): the run that answers it links to
        it. Counted by mode and disposition."""
        with message_span(self.s.key, msg.mode or "") as span:
            receipt = await self._accept(msg, traceparent(span))
            span.set_attribute("agentlane.message.seq", receipt.message_seq)
            span.set_attribute("agentlane.message.disposition", receipt.disposition.value)
        self.metrics.m.message(receipt.mode.value, receipt.disposition.value)
        return receipt

    def _take_model(self, switch: ModelSwitch | None) -> None:
        """A message that names a model sets the session's model for the runs that start from
        now on (a run in progress keeps its own), with the window the client found for it.
        State only, no command."""
        if switch is None:
            return
        settings = self.s.settings
        settings.model = ModelRef(provider=switch.provider, model=switch.model)
        settings.context_window = switch.context_window
        settings.context_window_source = switch.context_window_source

    def _take_thinking(self, word: str | None) -> None:
        """A message that names a thinking level sets the session's level for the runs that
        start from now on (a run in progress keeps its own). State only, no command."""
        level = normalize_thinking_level(word)
        if level is not None:
            self.s.settings.thinking = level

    def _take_reasoning(self, mode: str | None) -> None:
        """As `_take_thinking`: what runs from now on show of the model's reasoning. State only
        (messages recorded before the field never carry it)."""
        if mode is not None and reasoning_mode_problem(mode) is None:
            self.s.settings.reasoning_mode = mode

    async def _accept(self, msg: InboundMessage, trace: str | None = None) -> SendReceipt:
        if not self.ready:
            # Only while a reopened session restores its settings. Never yield otherwise: the
            # message must be in the queue before the main loop looks at it again.
            self.accepting += 1
            try:
                await workflow.wait_condition(lambda: self.ready)
            finally:
                self.accepting -= 1
            if self.branch_error is not None:
                raise ApplicationError(f"session {self.s.key} was not made: {self.branch_error}")
        self._take_callback(msg.routing)
        self._take_thinking(msg.thinking)
        self._take_reasoning(msg.reasoning)
        self._take_model(msg.switch_model)
        qs = self._queue_settings(msg)
        mode = qs.mode
        self.s.message_seq += 1
        seq = self.s.message_seq
        turn = UserTurn(
            # Message numbers restart when a closed session is reopened; the chain's first run id
            # makes the transcript id unique anyway (and survives continue-as-new).
            entry_id=f"{self.s.key}.{chain_token_of(workflow.info().first_execution_run_id)}:m{seq}",
            text=msg.text,
            routing=msg.routing,
            sender=msg.sender,
            traceparent=trace,
        )
        item = QueuedMessage(
            seq=seq,
            mode=mode,
            turn=turn,
            enqueued_at=workflow.time(),
            message_id=msg.message_id,
            debounce_ms=qs.debounce_ms,
            source=msg.source,
        )
        now = workflow.time()
        by_text = qs.dedupe == DedupeMode.PROMPT and self.patches(PROMPT_DEDUPE_PATCH)
        if check_duplicate(
            self.s.queue, self.s.recent_ids, item, self.s.key, qs.dedupe, now, by_text
        ):
            note = "already received (same message id)"
            original = self._original(msg.message_id)
            # Its fate names the message it repeats, so `wait_started` can answer with that
            # one's run (state only: no command changes).
            self._set_fate(
                seq,
                FateState.DUPLICATE,
                note=note,
                duplicate_of=original.seq if original is not None else None,
            )
            receipt = self._receipt(seq, SendDisposition.DUPLICATE, mode, note=note)
            if original is not None:
                receipt.duplicate_of, receipt.original = original.seq, original
            return receipt
        remembered = recent_key(item, self.s.key, qs.dedupe)
        if remembered is not None:
            self.s.recent_ids = remember(self.s.recent_ids, remembered, now)
        accept_now = self.patches(ACCEPT_ON_ENQUEUE_PATCH)
        action = decide(mode, busy=self._busy() or bool(self.s.queue))
        if action == Action.RUN_NOW:
            self._enqueue(item, qs)
            # Its run is announced: an abort from now on is for that run (state only).
            self.s.announced_seq = seq
            if accept_now:
                return self._receipt(seq, SendDisposition.STARTED, mode)
            await workflow.wait_condition(lambda: seq in self.started)
            return self._receipt(seq, SendDisposition.STARTED, mode, run_id=self.started[seq])
        if action == Action.INTERRUPT:
            self._enqueue(item, qs, front=True, exempt=True)
            pending = interrupt_ahead(self.s.queue, seq)
            interrupted = self.current_run_id
            await self._abort_current("interrupted by a new message", msg.by or msg.sender)
            if accept_now:
                note = f"stops {interrupted}" if interrupted else ""
                if pending is not None:
                    note = f"runs after message #{pending}, an interrupt sent before it"
                return self._receipt(seq, SendDisposition.INTERRUPTED, mode, note=note)
            await workflow.wait_condition(lambda: seq in self.started)
            return self._receipt(seq, SendDisposition.INTERRUPTED, mode, run_id=self.started[seq])
        if action in (Action.STEER, Action.STEER_AND_QUEUE):
            steered = await self._steer(turn)
            queue_it = after_steer(action, steered) is not None
            if steered and queue_it and self.backlog_copies:
                item = backlog_copy(item)
            queued = queue_it and self._enqueue(item.model_copy(update={"debounce": True}), qs)
            if queue_it and not queued and not steered:
                return self._dropped_receipt(seq, mode, qs)
            if steered:
                if action == Action.STEER:
                    self._set_fate(
                        seq,
                        FateState.STEERED,
                        run_id=self.current_run_id,
                        message_id=msg.message_id,
                    )
                return self._receipt(seq, SendDisposition.STEERED, mode, run_id=self.current_run_id)
            return self._receipt(
                seq,
                SendDisposition.QUEUED,
                mode,
                note="the run could not take steering; queued instead",
            )
        if not self._enqueue(item.model_copy(update={"debounce": True}), qs):
            return self._dropped_receipt(seq, mode, qs)
        ahead = self.current_run_id or "the messages ahead of it"
        interrupts = [q.seq for q in self.s.queue if q.mode == QueueMode.INTERRUPT and q.seq != seq]
        if interrupts:
            # Interrupts wait at the head: they run first (state only: the receipt's words).
            ahead = f"message #{max(interrupts)} (an interrupt sent before it)"
        return self._receipt(seq, SendDisposition.QUEUED, mode, note=f"runs after {ahead}")

    def _take_callback(self, routing: Routing) -> None:
        """A message that names a callback URL sets the session's webhook from then on (the
        latest one named wins; runs not yet delivered go to it)."""
        target = target_of(routing, self.s.key)
        if target is None:
            return
        if self.s.webhook is not None:
            self.s.webhook.target = target
            return
        if not self.patches(WEBHOOK_PATCH):
            return
        self.s.webhook = WebhookState(target=target)
        self.hooks = WebhookQueue(self.s.key, self.s.webhook)
        self.hooks.start()

    @workflow.query
    def webhook_run(self, run_id: str) -> RunDeliveryInfo:
        """Asked by the delivery activity: whether `run_id` ended, and how."""
        if self.hooks is None:
            return RunDeliveryInfo(known=False)
        return self.hooks.run_info(run_id)

    @send.validator
    def validate_send(self, msg: InboundMessage) -> None:
        self._check_message(msg)
        self._check_room(msg)
        # Here only, not in `_check_message`: validators do not run on replay, and a signal
        # taken by older code must be taken the same way again.
        self._check_fits(msg)

    def _check_fits(self, msg: InboundMessage) -> None:
        switch = msg.switch_model
        model = self.s.settings.model
        ref = f"{switch.provider}/{switch.model}" if switch else model.label()
        window = switch.context_window if switch else (self.s.settings.context_window or 0)
        why = message_too_large(msg.text, window, ref)
        if why is not None:
            raise ValueError(why)

    def _check_message(self, msg: InboundMessage) -> None:
        check_inbound(msg)
        try:
            self._queue_settings(msg)
        except UnknownQueueMode as err:
            raise ValueError(str(err)) from err
        if self.closing and (self.finalizing or not self.closing_takes_messages):
            raise ValueError(
                SESSION_ENDING
                if self.finalizing
                else "the session is closing and accepts no more messages"
            )

    def _check_room(self, msg: InboundMessage) -> None:
        """A send that `drop:new` would turn away is refused before it is accepted (its sender
        keeps the text). A signal, already durable, is accepted and dropped visibly instead."""
        qs = self._queue_settings(msg)
        steers = qs.mode in (QueueMode.STEER, QueueMode.INTERRUPT) and self._busy()
        if not steers and qs.drop == DropPolicy.NEW and len(self.s.queue) >= qs.cap:
            raise ValueError(
                f"the session's queue is full ({len(self.s.queue)} of {qs.cap} messages "
                "waiting, drop policy `new`); wait for the current run, or abort it"
            )

    def _receipt(
        self,
        seq: int,
        disposition: SendDisposition,
        mode: QueueMode,
        run_id: str | None = None,
        note: str = "",
    ) -> SendReceipt:
        return SendReceipt(
            session_key=self.s.key,
            message_seq=seq,
            disposition=disposition,
            mode=mode,
            run_id=run_id,
            queue_length=len(self.s.queue),
            note=note,
        )

    def _enqueue(
        self, item: QueuedMessage, qs: QueueSettings, front: bool = False, exempt: bool = False
    ) -> bool:
        """Queue a message under the cap (SPEC §17.4): the drop policy makes room, and whatever it
        drops is counted, summarised, given its fate and recorded (`_drop`). False: `drop:new`
        turned this message away (`exempt`, an interrupt, is queued anyway)."""
        capped = apply_cap(
            self.s.queue,
            self.s.overflow,
            qs.cap,
            qs.drop,
            by_age=self.patches(CAP_BY_AGE_PATCH),
        )
        self.s.queue, self.s.overflow = capped.queue, capped.overflow
        for dropped in capped.dropped:
            self._drop(dropped, qs)
        if not capped.accept_new and not exempt and self._records_drops():
            self._drop(item, qs)
            return False
        if front and self._keeps_queue_order():
            self.s.queue = with_interrupt(self.s.queue, item)
        else:
            self.s.queue = [item, *self.s.queue] if front else [*self.s.queue, item]
        self._set_fate(item.seq, FateState.PENDING, message_id=item.message_id)
        self.metrics.m.queue_depth(self.s.key, len(self.s.queue))
        self._show_running()
        if item.debounce:
            self.s.last_enqueued_at = workflow.time()
        return True

    def _records_drops(self) -> bool:
        if self.records_drops is None:
            self.records_drops = self.patches(RECORD_DROPS_PATCH)
        return self.records_drops

    def _drop(self, item: QueuedMessage, qs: QueueSettings) -> None:
        """A message the queue policy drops: its fate says so, and its text goes to the
        transcript with an event for its sender (`_record_drops`), before the next run starts."""
        if not self._records_drops():
            self._set_fate(
                item.seq,
                FateState.DROPPED,
                note=f"dropped by the queue cap ({qs.cap}, drop policy {qs.drop.value})",
            )
            return
        fate = drop_fate(qs.drop)
        self._set_fate(item.seq, FateState.DROPPED, note=drop_note(qs.drop, qs.cap, fate))
        self.s.dropped_messages += 1
        self.s.drops.append(
            DroppedMessage(
                seq=item.seq,
                entry_id=item.turn.entry_id,
                text=item.turn.text,
                message_id=item.message_id,
                sender=item.turn.sender,
                policy=qs.drop,
                cap=qs.cap,
                fate=fate,
                at=workflow.time(),
            )
        )

    async def _record_drops(self) -> None:
        """Writes dropped messages to the transcript and announces them, a batch at a time;
        what could not be written stays in the state and is tried again."""
        while True:
            await workflow.wait_condition(lambda: bool(self.s.drops) and not self.handing_over)
            batch = drops_to_record(self.s.drops)
            self.recording_drops = True
            try:
                await workflow.execute_local_activity(
                    RECORD_DROPPED_MESSAGES,
                    RecordDropsInput(session_key=self.s.key, items=batch),
                    result_type=RecordDropsResult,
                    start_to_close_timeout=TREE_STEP_TIMEOUT,
                    schedule_to_close_timeout=TREE_STEP_DEADLINE,
                    summary=f"record {len(batch)} dropped message(s)",
                )
            except (ActivityError, ApplicationError) as err:
                workflow.logger.warning("dropped messages not recorded yet: %s", err)
                self.recording_drops = False
                await workflow.sleep(DROP_RECORD_RETRY, summary="retry recording dropped messages")
                continue
            self.recording_drops = False
            self.s.drops = self.s.drops[len(batch) :]

    def _dropped_receipt(self, seq: int, mode: QueueMode, qs: QueueSettings) -> SendReceipt:
        note = drop_note(qs.drop, qs.cap, drop_fate(qs.drop))
        return self._receipt(seq, SendDisposition.DROPPED, mode, note=note)

    def _requeue_turn(self, turn: UserTurn) -> QueuedMessage:
        """A turn the session already accepted comes back (late steering, a failed run): under
        its own message number, whose fate then follows it to the run that takes it (its sender
        was told that number; under a new one `wait_started` named the run it never reached)."""
        seq = seq_of(turn.entry_id) if self._keeps_queue_order() else None
        if seq is None:
            self.s.message_seq += 1
            seq = self.s.message_seq
        else:
            self._set_fate(
                seq, FateState.PENDING, note="queued again: the run it steered ended first"
            )
        return QueuedMessage(
            seq=seq,
            mode=QueueMode.FOLLOWUP,
            turn=turn,
            enqueued_at=workflow.time(),
        )

    def _process_host(self) -> str | None:
        """Where the session's background processes are listed for stopping: the host of its
        workspace, once known (None: this worker, as sessions recorded before did)."""
        host = self.s.settings.workspace_host
        return host if host is not None and self.patches(STOP_ON_HOST_PATCH) else None

    def _keeps_queue_order(self) -> bool:
        if self.keeps_queue_order is None:
            self.keeps_queue_order = self.patches(QUEUE_ORDER_PATCH)
        return self.keeps_queue_order

    def _show_running(self) -> None:
        """While a run runs, the session's page says which, since when, and how many messages
        wait (rewritten as messages arrive; no history event)."""
        if self.run_shown is not None:
            number, run_id, since = self.run_shown
            workflow.set_current_details(
                run_details.session_running(number, run_id, since, len(self.s.queue))
            )

    def _busy(self) -> bool:
        return self.s.in_flight is not None or self.child is not None

    async def _steer(self, turn: UserTurn) -> bool:
        if self.child is None:
            return False
        try:
            await self.child.signal(AgentRunWorkflow.steer, turn)
        except Exception:  # the run ended between the check and the signal
            return False
        if self.s.in_flight is not None:
            self.s.in_flight.steered.append(turn)
        return True

    async def _abort_current(
        self, reason: str, by: str | None = None, hold: bool = False
    ) -> str | None:
        """Stop the run in flight, if any; return its id. An abort that arrives while the run's
        child is still being started is held and delivered as soon as it has started. With
        `hold` (an operator's abort), so is one for a run announced `started` but not made yet
        (an interrupt or a reset only stops a run that exists)."""
        target = abort_target(self._busy(), self.s.announced_seq, self.s.queue, self.accepting)
        if target == AbortTarget.ABOUT_TO_START and hold and self.patches(HOLD_ABORT_PATCH):
            if self.abort_since is None:
                self.abort_since = workflow.time()
            upto = held_upto(self.s.announced_seq, self.s.queue, self.s.message_seq)
            self.s.held_abort = HeldAbort(reason=reason, by=by, upto_seq=upto)
            # The id the next run gets (`_run_batch`); only a start refused for a taken id (a
            # run of an earlier incarnation of this key) moves the abort to the one after.
            return run_workflow_id(self.s.key, self.s.run_count + 1)
        if target != AbortTarget.RUNNING:
            return None
        if self.abort_since is None:
            self.abort_since = workflow.time()
        if self.child is None:
            self.abort_pending = reason
            self.abort_pending_by = by
            return self.current_run_id
        try:
            # Who asked travels only when known: the signal stays as it was otherwise.
            args = [reason] if by is None else [reason, by]
            await self.child.signal(AgentRunWorkflow.abort, args=args)
        except Exception:
            workflow.logger.info("abort: run %s already ended", self.current_run_id)
        return self.current_run_id

    @workflow.signal
    async def abort(self, req: AbortRequest) -> None:
        """Fire-and-forget abort, kept for clients (and histories) from before `abort_run`. The
        way a client's abort arrives when no worker answered: held like `abort_run`'s."""
        await self._abort_current(req.reason, req.by, hold=True)

    @workflow.update
    async def abort_run(self, req: AbortRequest) -> AbortReceipt:
        """Abort the run in flight (or the one announced `started` and about to be made) and
        say which one, or that there is nothing to abort."""
        run_id = await self._abort_current(req.reason, req.by, hold=True)
        waiting = len(self.s.queue)
        held = self.s.held_abort if run_id is not None and not self._busy() else None
        if held is not None:
            # The messages the aborted run takes are not waiting after it.
            waiting -= len(held_run_queue(self.s.queue, held.upto_seq) or [])
        note = abort_note(run_id, waiting, held is not None)
        if held is not None:
            # Answered once that run exists (it has taken the abort), so the caller can wait for
            # it by the id the receipt names; a handover answers at once.
            await workflow.wait_condition(
                lambda: self.s.held_abort is not held or self.handing_over
            )
        return AbortReceipt(session_key=self.s.key, run_id=run_id, queue_length=waiting, note=note)

    @workflow.update
    async def wait_started(self, seq: int) -> MessageFate:
        """Wait until message `seq` has been taken by a run (or steered, dropped, given up).
        Answers `pending` when the session hands over to its next execution, or while
        MAX_START_WAITERS other callers wait (and, in sessions recorded before
        SETTLED_WAIT_PATCH, while the message is queued): ask again."""
        if not self.ready:
            # A reopened session is restoring its settings; messages that came with its start
            # are numbered once that is done.
            await workflow.wait_condition(lambda: self.ready)
            if not 1 <= seq <= self.s.message_seq:
                # After acceptance only an ApplicationError fails the update (not the task).
                raise ApplicationError(f"session {self.s.key} has no message #{seq}")
        if self.settled_waits and self.start_waiters < MAX_START_WAITERS:
            self.start_waiters += 1
            try:
                await workflow.wait_condition(
                    lambda: settled(self._answer(seq)) or self.handing_over
                )
            finally:
                self.start_waiters -= 1
        else:
            await workflow.wait_condition(
                lambda: self._answer(seq) is not None or self.handing_over
            )
        return self._answer(seq) or MessageFate(seq=seq, state=FateState.PENDING)

    @wait_started.validator
    def validate_wait_started(self, seq: int) -> None:
        if self.ready and not 1 <= seq <= self.s.message_seq:
            raise ValueError(f"session {self.s.key} has no message #{seq}")

    def _answer(self, seq: int) -> MessageFate | None:
        """The fate `wait_started` answers with: kept, or let go long ago; None: not yet."""
        known = self._fate(seq)
        return known or forgotten(seq, known, self.s.fates_let_go)

    def _fate(self, seq: int) -> MessageFate | None:
        for fate in reversed(self.s.fates):
            if fate.seq == seq:
                return fate
        return None

    def _set_fate(
        self,
        seq: int,
        state: FateState,
        run_id: str | None = None,
        note: str = "",
        message_id: str | None = None,
        duplicate_of: int | None = None,
    ) -> None:
        previous = self._fate(seq)
        if message_id is None and previous is not None:
            message_id = previous.message_id
        fates = [f for f in self.s.fates if f.seq != seq]
        fates.append(
            MessageFate(
                seq=seq,
                state=state,
                run_id=run_id,
                note=note,
                message_id=message_id,
                duplicate_of=duplicate_of,
                at=workflow.time(),
            )
        )
        if not self.bounded_fates:
            self.s.fates = fates[-RECENT_FATES:]
            return
        self.s.fates, let_go = kept(fates, workflow.time())
        self.s.fates_let_go = max(self.s.fates_let_go, let_go)

    def _original(self, message_id: str | None) -> MessageFate | None:
        """The accepted message a duplicate repeats (what a sender that retried needs)."""
        if message_id is None:
            return None
        for fate in reversed(self.s.fates):
            if fate.message_id == message_id and fate.state != FateState.DUPLICATE:
                return fate
        return None

    @workflow.signal
    def close(self) -> None:
        self.closing = True

    # -- approvals (issue 21; the run's side is workflows/approval_wait.py) -------------------

    @workflow.signal
    def approval_opened(self, approval: PendingApproval) -> None:
        # A sub-agent's approval names the session's run it belongs to (`root_run_id`).
        if (approval.root_run_id or approval.run_id) == self.current_run_id:
            self.s.approvals = [*self.s.approvals, approval]

    @workflow.signal
    def approval_closed(self, closed: ApprovalClosed) -> None:
        self._close_approvals([closed])

    def _close_approvals(self, closed: list[ApprovalClosed]) -> None:
        ids = {c.id for c in closed}
        self.s.approvals = [a for a in self.s.approvals if a.id not in ids]
        self.s.approvals_closed = closed_after(self.s.approvals_closed, closed)

    @workflow.update
    async def decide_approval(self, decision: ApprovalDecision) -> ApprovalReceipt:
        """Approve or deny a waiting tool call: forwarded to the run, answered once the run
        took it (or the approval ended otherwise first: the receipt says so)."""
        pending = next(a for a in self.s.approvals if a.id == decision.id)
        self.deciding.add(decision.id)
        try:
            if pending.root_run_id:
                # A sub-agent's run (a child of the session's run) waits: told directly.
                await self._tell_subagent(pending, decision)
            elif self.child is not None:
                try:
                    await self.child.signal(AgentRunWorkflow.decide_approval, decision)
                except Exception:
                    workflow.logger.info("approval: run %s already ended", pending.run_id)
            await workflow.wait_condition(
                lambda: all(a.id != decision.id for a in self.s.approvals)
            )
        finally:
            self.deciding.discard(decision.id)
        closed = next(c for c in reversed(self.s.approvals_closed) if c.id == decision.id)
        wanted = ApprovalOutcome.APPROVED if decision.approve else ApprovalOutcome.DENIED
        note = "" if closed.outcome == wanted else f"the approval ended first: {closed.outcome}"
        return ApprovalReceipt(id=decision.id, outcome=closed.outcome, tool=pending.tool, note=note)

    @staticmethod
    async def _tell_subagent(pending: PendingApproval, decision: ApprovalDecision) -> None:
        run = workflow.get_external_workflow_handle(pending.run_id)
        try:
            await run.signal(AgentRunWorkflow.decide_approval, decision)
        except Exception:
            # Ended meanwhile: its top-level run's end closes the approval.
            workflow.logger.info("approval: sub-agent run %s already ended", pending.run_id)

    @decide_approval.validator
    def validate_decide_approval(self, decision: ApprovalDecision) -> None:
        problem = decision_problem(
            self.s.key, decision.id, self.s.approvals, self.s.approvals_closed, self.deciding
        )
        if problem is not None:
            raise ValueError(problem)

    @workflow.query
    def status(self) -> SessionStatus:
        return SessionStatus(
            key=self.s.key,
            phase=SessionPhase.RUNNING if self._busy() else SessionPhase.IDLE,
            current_run_id=self.current_run_id,
            queue_length=len(self.s.queue),
            queued_modes=[q.mode for q in self.s.queue],
            turns=self.s.turns,
            runs=self.s.run_count,
            usage=self.s.usage,
            cost=cost_label(self.s.usage.cost),
            agent_id=self.s.settings.agent_id,
            workspace=self.s.settings.workspace,
            workspace_host=self.s.settings.workspace_host,
            model=self.s.settings.model.label(),
            thinking=self.s.settings.thinking,
            reasoning_mode=self.s.settings.reasoning_mode,
            provider_window=self.s.provider_windows.get(self.s.settings.model.label()),
            last_result=self.s.last_result,
            failed_messages=self.s.failed_messages,
            dropped_messages=max(
                self.s.dropped_messages,
                sum(1 for f in self.s.fates if f.state == FateState.DROPPED),
            ),
            queue_override=self.s.queue_override,
            queue_settings=self._queue_settings(),
            resets=self.s.resets,
            last_reset_entry_id=self.s.last_reset_entry_id,
            webhook=self.hooks.status() if self.hooks is not None else None,
            approvals=list(self.s.approvals),
        )

    # -- reset and branches (issue 10) --------------------------------------------------------

    @workflow.update
    async def reset(self, req: ResetRequest) -> ResetReceipt:
        """Start the session afresh: abort a busy run and wait until it ended, then write the
        reset marker. Queued messages stay, and run after it, in the fresh context."""
        # Counted before the first await: the main loop starts no run from here on.
        self.resets_pending += 1
        try:
            # The reset is announced on the session's stream, so that must exist; and resets
            # never interleave (each numbers its marker).
            await workflow.wait_condition(
                lambda: (
                    (self.ready and self.s.events_started and not self.resetting)
                    or self.branch_error is not None
                )
            )
            if self.branch_error is not None:
                raise ApplicationError(f"session {self.s.key} was not made: {self.branch_error}")
            self.resetting = True
            try:
                return await self._reset(req)
            finally:
                self.resetting = False
        finally:
            self.resets_pending -= 1

    @reset.validator
    def validate_reset(self, req: ResetRequest) -> None:
        if self.closing:
            raise ValueError(f"session {self.s.key} is closing; a new message starts it again")
        if self.branch_error is not None:
            raise ValueError(f"session {self.s.key} was not made: {self.branch_error}")

    async def _reset(self, req: ResetRequest) -> ResetReceipt:
        aborted = await self._abort_current(f"reset: {req.reason}", req.by)
        if self._busy():
            await workflow.wait_condition(lambda: not self._busy())
        # What the old context started in the background goes with it.
        await stop_background_processes(self.s.key, self.patches.own_marker, self._process_host())
        number = self.s.resets + 1
        chain = chain_token_of(workflow.info().first_execution_run_id)
        queued = len(self.s.queue)
        try:
            written: ResetWritten = await workflow.execute_local_activity(
                RESET_SESSION,
                ResetInput(
                    session_key=self.s.key,
                    entry_id=reset_entry_id(self.s.key, chain, number),
                    reason=req.reason,
                    by=req.by,
                    aborted_run_id=aborted,
                    queued_kept=queued,
                ),
                result_type=ResetWritten,
                start_to_close_timeout=TREE_STEP_TIMEOUT,
                schedule_to_close_timeout=TREE_STEP_DEADLINE,
                summary=f"reset {number}",
            )
        except (ActivityError, ApplicationError) as err:
            # A local activity's own failure can arrive unwrapped. After acceptance only an
            # ApplicationError fails the update (not the task).
            cause = err.cause if isinstance(err, ActivityError) else err
            raise ApplicationError(f"the reset could not be written: {cause or err}") from err
        self.s.resets = number
        self.s.last_reset_entry_id = written.entry_id
        self.s.last_entry_id = written.entry_id
        # The last run's result describes the old context (its reply, the context tokens of its
        # last call): gone with it. The session's totals (runs, turns, tokens billed) stay.
        self.s.last_result = None
        workflow.set_current_details(f"idle; reset **{written.entry_id}**")
        return ResetReceipt(
            session_key=self.s.key,
            entry_id=written.entry_id,
            aborted_run_id=aborted,
            queued_kept=queued,
            note=reset_note(aborted, queued),
        )

    @workflow.update
    async def branch_ready(self) -> BranchReceipt:
        """Answers once a branched session's history is copied (or fails saying why)."""
        await workflow.wait_condition(
            lambda: self.branch_receipt is not None or self.branch_error is not None
        )
        if self.branch_receipt is None:
            raise ApplicationError(self.branch_error or "the branch was not made")
        return self.branch_receipt

    @branch_ready.validator
    def validate_branch_ready(self) -> None:
        if self.branch_source is None:
            raise ValueError(f"session {self.s.key} is not a branch being made")

    async def _make_branch(self, source: BranchSource) -> bool:
        """The branch's first step: its history, copied from the parent up to the branch point,
        then the branch marker; and the parent's settings (model, workspace, thinking...)."""
        chain = chain_token_of(workflow.info().first_execution_run_id)
        try:
            copied: BranchCopied = await workflow.execute_local_activity(
                COPY_BRANCH,
                BranchCopyInput(
                    session_key=self.s.key,
                    source=source,
                    entry_id=branch_entry_id(self.s.key, chain),
                ),
                result_type=BranchCopied,
                start_to_close_timeout=TREE_STEP_TIMEOUT,
                schedule_to_close_timeout=TREE_STEP_DEADLINE,
                summary=f"copy {source.parent_session} up to {source.branch_point}",
            )
        except (ActivityError, ApplicationError) as err:
            # A local activity's own failure can arrive unwrapped.
            cause = err.cause if isinstance(err, ActivityError) else err
            self.branch_error = getattr(cause, "message", None) or str(cause or err)
            return False
        if copied.settings is not None:
            self.s.settings = copied.settings
            self.s.queue_override = copied.queue_override
        self.s.last_entry_id = copied.entry_id
        self.branch_receipt = BranchReceipt(
            session_key=self.s.key,
            parent_session=source.parent_session,
            branch_point=source.branch_point,
            entry_id=copied.entry_id,
            copied=copied.copied,
        )
        return True

    @workflow.update
    async def configure_queue(self, change: QueueChange) -> QueueSettings:
        """The `/queue` directive: set (merge) or reset the session's queue override; answers the
        settings now in force for a message without its own."""
        if change.reset:
            self.s.queue_override = None
        elif change.options is not None:
            base = self.s.queue_override or QueueOptions()
            self.s.queue_override = base.model_copy(
                update=change.options.model_dump(exclude_none=True)
            )
        # Kept beside the transcript: a reopened session keeps its queue settings.
        await self._record_session()
        return self._queue_settings()

    async def _record_session(self) -> None:
        await workflow.execute_local_activity(
            RECORD_SESSION,
            RecordSessionInput(
                key=self.s.key,
                settings=self.s.settings,
                queue_override=self.s.queue_override,
                run_count=self.s.run_count,
                totals=SessionTotals(
                    turns=self.s.turns,
                    usage=self.s.usage,
                    dropped_messages=self.s.dropped_messages,
                ),
                recent_ids=self.s.recent_ids,
            ),
            start_to_close_timeout=SESSION_RECORD_TIMEOUT,
            summary="record session settings",
        )

    # -- the lane ---------------------------------------------------------------------------

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        return rollover_due(
            length=info.get_current_history_length(),
            size=info.get_current_history_size(),
            suggested=info.is_continue_as_new_suggested(),
            explicit_events=self.s.settings.continue_as_new_after_events,
            bounds=HistoryBounds(ROLLOVER_EVENTS, ROLLOVER_BYTES) if self.bounded else None,
        )

    async def _restore(self, inp: SessionInput) -> int:
        """Settings an earlier incarnation of this key recorded (those the opening message did
        not name), and where its event stream ended."""
        if not inp.fresh or not self.patches(RESTORE_PATCH):
            self.ready = True
            return 0
        restored: RestoredSession = await workflow.execute_local_activity(
            RESTORE_SESSION,
            RestoreSessionInput(
                key=self.s.key,
                settings=self.s.settings,
                queue_override=self.s.queue_override,
                explicit=inp.explicit,
            ),
            result_type=RestoredSession,
            start_to_close_timeout=SESSION_RECORD_TIMEOUT,
            summary="restore session settings",
        )
        self.s.settings = restored.settings
        self.s.queue_override = restored.queue_override
        self.s.run_count = max(self.s.run_count, restored.run_count)
        if restored.totals is not None and restored.reopened:
            # Its totals go on from the last incarnation's, as its run numbers do.
            self.s.turns += restored.totals.turns
            self.s.usage = self.s.usage.plus(restored.totals.usage)
            self.s.dropped_messages += restored.totals.dropped_messages
        if restored.reopened and restored.recent_ids:
            # A redelivery of a message the last incarnation took is still a duplicate (a
            # chat platform's retry can land right after an idle close).
            self.s.recent_ids = [*restored.recent_ids, *self.s.recent_ids]
        if restored.branch is not None and workflow.memo_value(MEMO_PARENT, None) is None:
            # A branch reopened by a message: it keeps its place in `sessions tree`.
            workflow.upsert_memo(
                {
                    MEMO_PARENT: restored.branch.parent_session,
                    MEMO_BRANCH_POINT: restored.branch.branch_point,
                }
            )
        self.ready = True
        return restored.events_offset

    async def _ensure_event_stream(self, base_offset: int = 0) -> None:
        if self.s.events_started:
            return
        try:
            await workflow.start_child_workflow(
                SessionEventsWorkflow.run,
                EventsInput(
                    session_key=self.s.key,
                    continue_as_new_after_events=(
                        self.s.settings.events_continue_as_new_after_events
                    ),
                    # A reopened session's stream goes on from the old one's last offset.
                    stream_state=WorkflowStreamState(base_offset=base_offset)
                    if base_offset
                    else None,
                    code=newest(EVENTS_CODE),
                ),
                id=events_workflow_id(self.s.key),
                parent_close_policy=ParentClosePolicy.ABANDON,
                priority=EVENTS_PRIORITY,
                static_summary=f"event stream of session {self.s.key}",
                # Found with its session: `AgentSessionKey = '<key>'` lists all three.
                search_attributes=typed({sa.SESSION_KEY.name: self.s.key}),
            )
        except WorkflowAlreadyStartedError:
            pass  # the stream outlived an earlier session workflow with this key
        self.s.events_started = True

    @workflow.run
    async def run(self, inp: SessionInput) -> None:
        self.bounded = self.patches(EARLY_ROLLOVER_PATCH)
        self.closing_takes_messages = self.patches(CLOSING_TAKES_PATCH)
        if inp.branch is not None and not await self._make_branch(inp.branch):
            # Nothing was made: `branch_ready` and senders that came meanwhile are told so, then
            # the workflow fails with the reason (what the UI shows, and a late client reads).
            self.closing = self.finalizing = True
            self.ready = True
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise ApplicationError(
                f"branch not made: {self.branch_error}", type="BranchNotMade", non_retryable=True
            )
        await self._ensure_event_stream(await self._restore(inp))
        if self.hooks is not None:
            self.hooks.start()
        self.drops_task = asyncio.create_task(self._record_drops())
        # A new incarnation (continue-as-new) shows the totals it carries until its first run.
        workflow.set_current_details(
            f"{run_details.session_idle(workflow.time())}\n\n{self._totals()}"
        )
        if self.s.in_flight is not None:
            # Handed over with a run's messages still held (older code): they were not handled.
            self._requeue(self.s.in_flight, "the session continued before the run ended")
        while True:
            await workflow.wait_condition(
                lambda: bool(self.s.queue) or self.closing or self._continue_as_new_due()
            )
            if self.resets_pending:
                # No run starts before an accepted reset has written its marker: queued messages
                # are answered in the fresh context.
                await workflow.wait_condition(lambda: not self.resets_pending)
                continue
            if not self.s.queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self.s.drops:
                    # Dropped messages are recorded before the session ends or hands over.
                    await workflow.wait_condition(lambda: not self.s.drops)
                    continue
                if self.closing:
                    if self.closing_takes_messages and self.s.queue:
                        continue  # a message accepted meanwhile: the close waits for it too
                    self.finalizing = True
                    if self.hooks is not None:
                        # Replies not yet delivered are delivered before the session ends.
                        await workflow.wait_condition(self.hooks.idle)
                    await stop_background_processes(
                        self.s.key, self.patches.own_marker, self._process_host()
                    )
                    if self.patches(RECORD_ON_CLOSE_PATCH):
                        # The next incarnation numbers its runs after this one's.
                        await self._record_session()
                    await workflow.get_external_workflow_handle(
                        events_workflow_id(self.s.key)
                    ).signal(SessionEventsWorkflow.close)
                    return
                await self._continue_as_new()
            if self._continue_as_new_due() and self.patches(HANDOVER_WITH_QUEUE_PATCH):
                await self._continue_as_new()
            head = self.s.queue[0]
            wait_ms = debounce_remaining_ms(
                self.s.last_enqueued_at,
                workflow.time(),
                item_debounce_ms(head, self._queue_settings().debounce_ms),
            )
            if wait_ms > 0:
                await workflow.sleep(timedelta(milliseconds=wait_ms), summary="queue debounce")
                continue
            if self.s.drops:
                # Drops are in the transcript and on the stream before the next run's entries.
                await workflow.wait_condition(lambda: not self.s.drops)
                continue
            batch = self._next_batch()
            assert batch is not None
            self.s.one_by_one = batch.one_by_one
            await self._run_batch(batch)
            if not self.s.queue:
                # A drain ends when the queue is empty (SPEC §17.5); a summary with nothing left
                # to carry it has nowhere to go.
                self.s.one_by_one = False
                self.s.overflow = OverflowState()

    def _next_batch(self) -> Batch | None:
        """The next run's messages. With an abort held for the run announced `started`, that run
        takes only the messages up to the announced one (and not the overflow summary): those
        queued behind it run after it, as they would behind a running run."""
        if self.s.held_abort is None:
            return next_batch(self.s.queue, self.s.overflow, self.s.one_by_one)
        covered = held_run_queue(self.s.queue, self.s.held_abort.upto_seq)
        if covered is None:
            # What it covered left the queue (dropped by the cap, or a duplicate): that run
            # will never be made, and the abort is not for any later one.
            self.s.held_abort = None
            return next_batch(self.s.queue, self.s.overflow, self.s.one_by_one)
        return next_batch(covered, None, self.s.one_by_one)

    async def _continue_as_new(self) -> None:
        self.handing_over = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        # Drops not yet recorded cross over in the state; one being written finishes first.
        await workflow.wait_condition(lambda: not self.recording_drops)
        if self.hooks is not None:
            await self.hooks.stop()
        self.s.continued += 1
        workflow.continue_as_new(SessionInput(state=self.s, code=newest(SESSION_CODE)))

    async def _run_batch(self, batch: Batch) -> None:
        self.s.run_count += 1
        run_number = self.s.run_count
        run_id = run_workflow_id(self.s.key, run_number)
        settings = self.s.settings
        # The batch's first message says what started the run (a cron firing runs alone: it is
        # sent as a follow-up). Histories from before sources existed only hold chat messages,
        # so the child's start command is unchanged for them and needs no patch.
        taken = set(batch.seqs)
        held_items = [q for q in self.s.queue if q.seq in taken]
        source = held_items[0].source if held_items else EntrySource.CHAT
        request = ExecutionRequest(
            session_key=self.s.key,
            run_id=run_id,
            run_number=run_number,
            agent_id=settings.agent_id,
            source=source,
            prompt=batch.turns,
            workspace=settings.workspace,
            create_workspace=settings.create_workspace,
            model=settings.model,
            thinking=settings.thinking,
            reasoning_mode=settings.reasoning_mode,
            budget_seconds=settings.run_budget_seconds,
            idle_timeout_seconds=idle_limit_seconds(source, settings.idle_timeout_seconds),
            parent_entry_id=self.s.last_entry_id,
            continue_as_new_after_events=settings.run_continue_as_new_after_events,
            counters_upsert_seconds=settings.counters_upsert_seconds,
            loop_detection=settings.loop_detection,
            subagents=settings.subagents,
            approvals=settings.approvals,
            max_turns=settings.max_turns,
            context_window=settings.context_window,
            context_window_source=settings.context_window_source,
            provider_windows=self.s.provider_windows,
            max_wait_seconds=settings.max_wait_seconds,
            workspace_host=settings.workspace_host,
            host_wait_seconds=settings.host_wait_seconds,
            # Held for this run (`_next_batch` took only what it covers): the signal sent once
            # it has started stays, for runs of code from before this field.
            abort_at_start=(
                StartAborted(reason=self.s.held_abort.reason, by=self.s.held_abort.by)
                if self.s.held_abort is not None
                else None
            ),
            profile_pin=(
                ProfilePin(profile_id=settings.auth_profile, source="user")
                if settings.auth_profile
                else self.s.profile_pin
            ),
        )
        # The batch stays in the session's hands (in_flight) until its run ends normally.
        self.s.in_flight = InFlight(run_id=run_id, items=held_items)
        self.s.queue = remove(self.s.queue, batch.seqs)
        self.metrics.m.queue_depth(self.s.key, len(self.s.queue))
        self.current_run_id = run_id
        # The summary is each row of the UI's workflow list: redacted, as the details are.
        preview = plain(redact(batch.turns[0].text[:PREVIEW_SOURCE_CHARS]))
        held = self.s.in_flight
        run_attributes = self._attributes_at_run_start(request, batch)
        try:
            self.child = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                RunInput(request=request, code=newest(RUN_CODE)),
                id=run_id,
                execution_timeout=timedelta(seconds=settings.run_budget_seconds + 3600),
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                priority=RUN_PRIORITY,
                static_summary=f"run {run_number} of {self.s.key}: {preview}",
                static_details=run_static_details(request, len(self.s.queue)),
                search_attributes=run_attributes,
            )
        except WorkflowAlreadyStartedError as err:
            # The id is taken (a run of an earlier incarnation of this key): the next attempt
            # gets the next run number.
            self.current_run_id = None
            self.s.in_flight = None
            self._requeue(held, f"could not start {run_id}: {err}")
            self._attributes_at_run_end(None)
            return
        for seq in batch.seqs:
            self.started[seq] = run_id
            self._set_fate(seq, FateState.STARTED, run_id=run_id)
        if self.s.announced_seq in batch.seqs:
            self.s.announced_seq = None
        if self.hooks is not None:
            self.hooks.run_started(run_id)
        # An abort that came while the run was being made, or before (held for it).
        waiting = self.s.held_abort
        if self.abort_pending is not None:
            reason, by = self.abort_pending, self.abort_pending_by
        elif waiting is not None:
            reason, by = waiting.reason, waiting.by
        else:
            reason, by = None, None
        self.abort_pending = self.s.held_abort = None
        if reason is not None:
            await self._abort_current(reason, by)
        self.run_shown = (run_number, run_id, workflow.time())
        self._show_running()
        try:
            result = await self.child
        except ChildWorkflowError as err:
            # A run that ended in error or was aborted fails its workflow with its result
            # (agentlane/run_outcome.py): that is the run's end like any other. Anything else
            # (terminated, timed out) is an abnormal end.
            ended = result_of_failure(err)
            if ended is None:
                result = await self._spent_by(self._failed_result(request, err))
                self._requeue(held, f"{run_id} ended abnormally: {err.cause or err}")
                await self._announce_abnormal_end(result)
            else:
                result = ended
                self._took(result, batch)
        else:
            self._took(result, batch)
        finally:
            # Approvals still listed for the run (it stopped while they waited) end with it.
            self._close_approvals(
                [
                    ApprovalClosed(id=a.id, outcome=ApprovalOutcome.CANCELLED)
                    for a in self.s.approvals
                    if (a.root_run_id or a.run_id) == run_id
                ]
            )
            self.child = None
            self.current_run_id = None
            self.s.in_flight = None
            self.abort_pending = None
            if self.abort_since is not None:
                self.metrics.m.abort_latency(since(self.abort_since))
                self.abort_since = None
        if self.hooks is not None:
            self.hooks.run_ended(run_id, run_end_of(result))
        self.s.last_result = self._compact(result)
        self._attributes_at_run_end(result)
        self.run_shown = None
        last = last_run_line(result, attributes.error_label(result.error))
        details = f"{run_details.session_idle(workflow.time(), last)}\n\n{self._totals()}"
        if self.hooks is not None:
            details += f"\n\n{self.hooks.summary()}"
        workflow.set_current_details(details)

    # -- search attributes (issue 12; what changes: workflows/policy/search_attributes.py) ------

    def _attributes_at_run_start(
        self, request: ExecutionRequest, batch: Batch
    ) -> TypedSearchAttributes | None:
        """The session's own (one upsert: phase running, and who and what if they changed),
        and the run's, which it starts with (no history event for those)."""
        if self.upserts_attributes is None:
            self.upserts_attributes = self.patches(SEARCH_ATTRIBUTES_PATCH)
        if not self.upserts_attributes:
            return None
        who = attributes.identity(
            self.s.key,
            request.agent_id,
            request.model.label(),
            batch.turns[-1].routing.channel,
        )
        upsert(
            attributes.changes(
                current(), {**who, sa.PHASE.name: attributes.RUNNING}, with_counters=False
            )
        )
        pin = request.profile_pin
        return typed(
            {
                **who,
                sa.PHASE.name: attributes.RUNNING,
                sa.SOURCE.name: request.source.value,
                sa.AUTH_PROFILE.name: pin.profile_id if pin is not None else None,
            }
        )

    def _attributes_at_run_end(self, result: ExecutionResult | None) -> None:
        """One upsert: idle, the session's totals, the error of the run that just ended (none
        when it succeeded), and the model that answered (a fallback's, if it fell back). None:
        the run did not start, only the phase goes back."""
        if not self.upserts_attributes:
            return
        values: Values = {sa.PHASE.name: attributes.IDLE}
        if result is None:
            upsert(attributes.changes(current(), values, with_counters=False))
            return
        values[sa.LAST_ERROR.name] = attributes.run_end_error(result.status, result.error)
        values.update(attributes.counters(self.s.turns, self.s.usage))
        if result.fallback_model:
            values[sa.MODEL.name] = result.fallback_model
        upsert(attributes.changes(current(), values, with_counters=True))

    def _requeue(self, held: InFlight, why: str) -> None:
        """A run that ended abnormally handled nothing: put its messages back at the head of the
        queue (steered ones as follow-ups), each at most MAX_RUN_ATTEMPTS times."""
        redelivery = after_abnormal_end(held.items, MAX_RUN_ATTEMPTS)
        for item in redelivery.given_up:
            self.s.failed_messages += 1
            self._set_fate(
                item.seq,
                FateState.FAILED,
                run_id=held.run_id,
                note=f"given up after {item.attempts} abnormal run ends; last: {why}",
            )
            workflow.logger.warning("message #%s given up: %s", item.seq, why)
        retry = list(redelivery.retry)
        for item in retry:
            self._set_fate(item.seq, FateState.PENDING, note=f"retrying: {why}")
        for turn in unconsumed_to_requeue(held.steered, self.s.queue):
            retry.append(self._requeue_turn(turn).model_copy(update={"debounce": True}))
        self.s.queue = [*retry, *self.s.queue]
        # Re-debounce (SPEC §17.5): a failing run is not retried in a tight loop.
        self.s.last_enqueued_at = workflow.time()

    def _took(self, result: ExecutionResult, batch: Batch) -> None:
        """A run's end (success, error or abort): its figures, what it learned, and the
        steering it did not take, back in the queue."""
        self._record(result)
        if result.workspace_host and not self.s.settings.workspace_host:
            # The first tool call found the workspace's host: later runs go there too.
            self.s.settings.workspace_host = result.workspace_host
        if result.profile_pin is not None and result.profile_pin.source == "auto":
            self.s.profile_pin = result.profile_pin
        back = [
            self._requeue_turn(turn)
            for turn in unconsumed_to_requeue(result.unconsumed, self.s.queue)
        ]
        if self._keeps_queue_order():
            self.s.queue = with_requeued(self.s.queue, back)
        else:
            self.s.queue = [*back, *self.s.queue]
        if batch.used_overflow:
            # Only what its prompt carried: messages dropped while it ran go in the next one's.
            self.s.overflow = overflow_after_run(self.s.overflow, batch.carried_dropped)

    def _failed_result(self, request: ExecutionRequest, err: ChildWorkflowError) -> ExecutionResult:
        now = workflow.now()
        return ExecutionResult(
            session_key=request.session_key,
            run_id=request.run_id,
            status=ExecutionStatus.ERROR,
            termination_reason=TerminationReason.ERROR,
            started_at=now,
            ended_at=now,
            error=ExecutionError(
                kind=ExecutionErrorKind.RUNTIME_ERROR, message=f"run ended abnormally: {err.cause}"
            ),
        )

    async def _spent_by(self, result: ExecutionResult) -> ExecutionResult:
        """An abnormally ended run's result with what its model calls spent (its transcript
        says), counted in the session's totals: a terminated run's tokens were billed."""
        if not self.patches(RUN_SPENT_PATCH):
            return result
        try:
            spent: RunSpent = await workflow.execute_local_activity(
                RUN_SPENT,
                RunSpentInput(session_key=self.s.key, run_id=result.run_id),
                result_type=RunSpent,
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                retry_policy=opts.FINISH_RETRY,
                summary=f"what {result.run_id} spent",
            )
        except ActivityError:
            return result  # the totals miss it, the session goes on
        result = result.model_copy(update={"turns": spent.turns, "usage": spent.usage})
        self._record(result)
        return result

    async def _announce_abnormal_end(self, result: ExecutionResult) -> None:
        """A run terminated (or timed out) in Temporal published no end: its watchers, which
        stop at its `agent_end` (the CLI's send, an adapter's `watch(until_run=...)`), would
        wait for ever. The session says it ended, and why, on the run's behalf."""
        if not self.patches(ABNORMAL_END_TOLD_PATCH):
            return
        why = result.error.message if result.error else "ended abnormally"
        now = workflow.time()
        announce = [
            Announcement(
                kind=EventKind.ERROR,
                ts=now,
                text=f"{why}; its messages run again in the next run",
                recoverable=True,
                data={"code": "abnormal_end"},
            ),
            Announcement(
                kind=EventKind.AGENT_END,
                ts=now,
                termination_reason=TerminationReason.ERROR.value,
                data={
                    "total_turns": result.turns,
                    "total_tokens": result.usage.accumulated.total,
                    "status": ExecutionStatus.ERROR.value,
                    "abnormal": True,
                },
            ),
        ]
        try:
            await workflow.execute_local_activity(
                PUBLISH_ANNOUNCEMENTS,
                PublishInput(session_key=self.s.key, run_id=result.run_id, announce=announce),
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                retry_policy=opts.FINISH_RETRY,
                summary=f"announce the end of {result.run_id}",
            )
        except ActivityError as err:
            workflow.logger.warning("end of %s not announced: %s", result.run_id, err)

    def _totals(self) -> str:
        """The session's figures for the Temporal UI."""
        usage = self.s.usage
        return f"session: {self.s.turns} turns, {usage.total} tokens, cost {cost_label(usage.cost)}"

    def _record(self, result: ExecutionResult) -> None:
        self.s.turns += result.turns
        self.s.usage = self.s.usage.plus(result.usage.accumulated)
        self.s.last_entry_id = result.last_entry_id or self.s.last_entry_id
        self.s.provider_windows = merged_windows(self.s.provider_windows, result.provider_windows)

    @staticmethod
    def _compact(result: ExecutionResult) -> ExecutionResult:
        # Keep the carried state small: the reply is in the transcript.
        return result.model_copy(update={"reply": result.reply[:500], "unconsumed": []})
