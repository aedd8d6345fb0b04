"""SessionWorkflow: one long-lived workflow per chat session (id `session:<key>`).

It is the session lane: at most one AgentRunWorkflow child at a time. Messages arrive as a
validated update (`send`); what happens to a message that arrives while a run is busy is decided
by its queue mode (`queue_policy`): steer it into the run, queue it durably, or interrupt the
run. Nothing is dropped: steering that reaches a run too late comes back in the run's result and
is queued again. The session continues as new when Temporal suggests it, between runs, carrying
only its compact state.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from agentlane.errors import ExecutionErrorKind
    from agentlane.event_stream import EventsInput
    from agentlane.ids import chain_token_of, events_workflow_id, run_workflow_id
    from agentlane.messages import (
        MAX_MESSAGE_CHARS,
        AbortRequest,
        InboundMessage,
        QueueMode,
        SendDisposition,
        SendReceipt,
        UnknownQueueMode,
        parse_queue_mode,
    )
    from agentlane.run import (
        EntrySource,
        ExecutionError,
        ExecutionRequest,
        ExecutionResult,
        ExecutionStatus,
        RunInput,
        TerminationReason,
        UserTurn,
    )
    from agentlane.session import (
        QueuedMessage,
        SessionInput,
        SessionPhase,
        SessionState,
        SessionStatus,
    )
    from workflows.agent_run import AgentRunWorkflow
    from workflows.queue_policy import (
        Action,
        Batch,
        debounce_remaining_ms,
        decide,
        next_batch,
        remove,
    )
    from workflows.session_events import SessionEventsWorkflow

RECENT_MESSAGE_IDS = 500


@workflow.defn(name="SessionWorkflow")
class SessionWorkflow:
    @workflow.init
    def __init__(self, inp: SessionInput) -> None:
        self.s: SessionState = inp.state
        self.child: ChildWorkflowHandle[AgentRunWorkflow, ExecutionResult] | None = None
        self.current_run_id: str | None = None
        self.started: dict[int, str] = {}
        self.closing = False

    # -- messages in ------------------------------------------------------------------------

    def _mode_of(self, msg: InboundMessage) -> QueueMode:
        return parse_queue_mode(msg.mode) if msg.mode else self.s.settings.default_mode

    @workflow.update
    async def send(self, msg: InboundMessage) -> SendReceipt:
        mode = self._mode_of(msg)
        self.s.message_seq += 1
        seq = self.s.message_seq
        if msg.message_id:
            if msg.message_id in self.s.recent_message_ids:
                return self._receipt(
                    seq, SendDisposition.DUPLICATE, mode, note="already received (same message id)"
                )
            self.s.recent_message_ids = (self.s.recent_message_ids + [msg.message_id])[
                -RECENT_MESSAGE_IDS:
            ]
        turn = UserTurn(
            # Message numbers restart when a closed session is reopened; the chain's first run id
            # makes the transcript id unique anyway (and survives continue-as-new).
            entry_id=f"{self.s.key}.{chain_token_of(workflow.info().first_execution_run_id)}:m{seq}",
            text=msg.text,
            routing=msg.routing,
            sender=msg.sender,
        )
        action = decide(mode, busy=self.child is not None)
        if action == Action.RUN_NOW:
            self._enqueue(seq, mode, turn, msg.message_id, debounce=False)
            await workflow.wait_condition(lambda: seq in self.started)
            return self._receipt(seq, SendDisposition.STARTED, mode, run_id=self.started[seq])
        if action == Action.INTERRUPT:
            self._enqueue(seq, mode, turn, msg.message_id, debounce=False, front=True)
            await self._signal_abort("interrupted by a new message")
            await workflow.wait_condition(lambda: seq in self.started)
            return self._receipt(seq, SendDisposition.INTERRUPTED, mode, run_id=self.started[seq])
        if action in (Action.STEER, Action.STEER_AND_QUEUE):
            steered = await self._steer(turn)
            if action == Action.STEER_AND_QUEUE or not steered:
                self._enqueue(seq, mode, turn, msg.message_id, debounce=True)
            if steered:
                return self._receipt(seq, SendDisposition.STEERED, mode, run_id=self.current_run_id)
            return self._receipt(
                seq,
                SendDisposition.QUEUED,
                mode,
                note="the run could not take steering; queued instead",
            )
        self._enqueue(seq, mode, turn, msg.message_id, debounce=True)
        return self._receipt(
            seq, SendDisposition.QUEUED, mode, note=f"runs after {self.current_run_id}"
        )

    @send.validator
    def validate_send(self, msg: InboundMessage) -> None:
        if not msg.text.strip():
            raise ValueError("message text is empty")
        if len(msg.text) > MAX_MESSAGE_CHARS:
            raise ValueError(
                f"message is {len(msg.text)} characters; the limit is {MAX_MESSAGE_CHARS}. "
                "Put large content in a workspace file and refer to it."
            )
        try:
            mode = self._mode_of(msg)
        except UnknownQueueMode as err:
            raise ValueError(str(err)) from err
        if self.closing:
            raise ValueError("the session is closing and accepts no more messages")
        queued = mode not in (QueueMode.STEER, QueueMode.INTERRUPT) or self.child is None
        if queued and len(self.s.queue) >= self.s.settings.queue_cap:
            raise ValueError(
                f"the session's queue is full ({len(self.s.queue)} messages waiting); "
                "wait for the current run, or abort it"
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
        self,
        seq: int,
        mode: QueueMode,
        turn: UserTurn,
        message_id: str | None,
        debounce: bool,
        front: bool = False,
    ) -> None:
        item = QueuedMessage(
            seq=seq,
            mode=mode,
            turn=turn,
            enqueued_at=workflow.time(),
            message_id=message_id,
            debounce=debounce,
        )
        self.s.queue = [item, *self.s.queue] if front else [*self.s.queue, item]
        if debounce:
            self.s.last_enqueued_at = workflow.time()

    async def _steer(self, turn: UserTurn) -> bool:
        if self.child is None:
            return False
        try:
            await self.child.signal(AgentRunWorkflow.steer, turn)
        except Exception:  # the run ended between the check and the signal
            return False
        return True

    async def _signal_abort(self, reason: str) -> None:
        if self.child is None:
            return
        try:
            await self.child.signal(AgentRunWorkflow.abort, reason)
        except Exception:
            workflow.logger.info("abort: run %s already ended", self.current_run_id)

    @workflow.signal
    async def abort(self, req: AbortRequest) -> None:
        await self._signal_abort(req.reason)

    @workflow.signal
    def close(self) -> None:
        self.closing = True

    @workflow.query
    def status(self) -> SessionStatus:
        return SessionStatus(
            key=self.s.key,
            phase=SessionPhase.RUNNING if self.child is not None else SessionPhase.IDLE,
            current_run_id=self.current_run_id,
            queue_length=len(self.s.queue),
            queued_modes=[q.mode for q in self.s.queue],
            turns=self.s.turns,
            runs=self.s.run_count,
            usage=self.s.usage,
            workspace=self.s.settings.workspace,
            model=self.s.settings.model.label(),
            last_result=self.s.last_result,
        )

    # -- the lane ---------------------------------------------------------------------------

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        limit = self.s.settings.continue_as_new_after_events
        if limit is not None and info.get_current_history_length() >= limit:
            return True
        return info.is_continue_as_new_suggested()

    async def _ensure_event_stream(self) -> None:
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
                ),
                id=events_workflow_id(self.s.key),
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"event stream of session {self.s.key}",
            )
        except WorkflowAlreadyStartedError:
            pass  # the stream outlived an earlier session workflow with this key
        self.s.events_started = True

    @workflow.run
    async def run(self, inp: SessionInput) -> None:
        await self._ensure_event_stream()
        while True:
            await workflow.wait_condition(
                lambda: bool(self.s.queue) or self.closing or self._continue_as_new_due()
            )
            if not self.s.queue:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self.closing:
                    await workflow.get_external_workflow_handle(
                        events_workflow_id(self.s.key)
                    ).signal(SessionEventsWorkflow.close)
                    return
                self.s.continued += 1
                workflow.continue_as_new(SessionInput(state=self.s))
            head = self.s.queue[0]
            if head.debounce:
                wait_ms = debounce_remaining_ms(
                    self.s.last_enqueued_at, workflow.time(), self.s.settings.debounce_ms
                )
                if wait_ms > 0:
                    await workflow.sleep(timedelta(milliseconds=wait_ms), summary="queue debounce")
                    continue
            batch = next_batch(self.s.queue)
            assert batch is not None
            await self._run_batch(batch)

    async def _run_batch(self, batch: Batch) -> None:
        self.s.run_count += 1
        run_number = self.s.run_count
        run_id = run_workflow_id(self.s.key, run_number)
        settings = self.s.settings
        request = ExecutionRequest(
            session_key=self.s.key,
            run_id=run_id,
            run_number=run_number,
            agent_id=settings.agent_id,
            source=EntrySource.CHAT,
            prompt=batch.turns,
            workspace=settings.workspace,
            create_workspace=settings.create_workspace,
            model=settings.model,
            thinking=settings.thinking,
            reasoning_mode=settings.reasoning_mode,
            budget_seconds=settings.run_budget_seconds,
            idle_timeout_seconds=settings.idle_timeout_seconds,
            parent_entry_id=self.s.last_entry_id,
            continue_as_new_after_events=settings.run_continue_as_new_after_events,
        )
        self.s.queue = remove(self.s.queue, batch.seqs)
        self.current_run_id = run_id
        preview = " ".join(batch.turns[0].text.split())[:80]
        self.child = await workflow.start_child_workflow(
            AgentRunWorkflow.run,
            RunInput(request=request),
            id=run_id,
            execution_timeout=timedelta(seconds=settings.run_budget_seconds + 3600),
            parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
            static_summary=f"run {run_number} of {self.s.key}: {preview}",
        )
        for seq in batch.seqs:
            self.started[seq] = run_id
        workflow.set_current_details(f"running **{run_id}**")
        try:
            result = await self.child
        except ChildWorkflowError as err:
            result = self._failed_result(request, err)
        finally:
            self.child = None
            self.current_run_id = None
        self._record(result)
        for turn in reversed(result.unconsumed):
            self.s.message_seq += 1
            self._enqueue(
                self.s.message_seq, QueueMode.FOLLOWUP, turn, None, debounce=False, front=True
            )
        workflow.set_current_details(
            f"idle; last run **{run_id}**: "
            f"{result.status.value} ({result.termination_reason.value})"
        )

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

    def _record(self, result: ExecutionResult) -> None:
        self.s.turns += result.turns
        self.s.usage = self.s.usage.plus(result.usage.accumulated)
        self.s.last_entry_id = result.last_entry_id or self.s.last_entry_id
        # Keep the carried state small: the reply is in the transcript.
        self.s.last_result = result.model_copy(
            update={"reply": result.reply[:500], "unconsumed": []}
        )
