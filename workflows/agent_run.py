"""AgentRunWorkflow: one agent run (model call -> tool calls -> model call ... until the model
stops calling tools), a child of the session.

Deterministic code only. Everything with side effects is an activity; everything large lives in
the transcript store. Termination reasons are those of seed 001 §9.4: no_tool_calls, timeout_48h
(the run's budget, a single timer), idle_timeout_120s (enforced inside the model activity),
abort_signal (the session's abort or interrupt, or a Temporal cancel), error. A client that
disconnects changes nothing.
"""

from __future__ import annotations

import asyncio
import builtins
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agentlane import search_attributes as sa
    from agentlane.approvals import ApprovalDecision
    from agentlane.errors import (
        CONFIG_ERROR,
        MODEL_IDLE_TIMEOUT,
        MODEL_PROVIDER_ERROR,
        WORKSPACE_MISSING,
        ExecutionErrorKind,
        ModelFailure,
    )
    from agentlane.events import Announcement, EventKind, turn_boundary
    from agentlane.ids import assistant_entry_id, chain_token_of
    from agentlane.messages import Routing
    from agentlane.model_calls import CALL_MODEL, ModelCallInput, ModelCallResult, ToolCallRef
    from agentlane.pricing import cost_label
    from agentlane.run import (
        ExecutionError,
        ExecutionResult,
        ExecutionStatus,
        RunCarry,
        RunInput,
        TerminationReason,
        UserTurn,
    )
    from agentlane.run_outcome import aborted_error, outcome_failure, said
    from agentlane.run_records import FINISH_RUN, FinishRunInput, FinishRunResult, engine_task_queue
    from agentlane.session import RunPhase, RunProgress
    from agentlane.subagents import SPAWN_TOOL
    from agentlane.tool_calls import ToolCallInput, ToolCallOutcome, tool_activity_name
    from agentlane.tool_policy_config import READ_TOOL_POLICY, ToolPolicyInput, ToolPolicyRequest
    from agentlane.transcript import Unanswered
    from workflows import activity_options as opts
    from workflows.approval_wait import ApprovalWait
    from workflows.legacy_failover import LegacyFailover
    from workflows.loop_end import LoopEnd
    from workflows.patches import (
        ENGINE_QUEUE_PATCH,
        FINISH_SHIELDED_PATCH,
        PRECISE_FAILURE_PATCH,
        REJECTED_COUNTED_PATCH,
        RUN_CODE,
        RUN_FAILS_PATCH,
        TURNS_AT_END_PATCH,
        Patches,
        newest,
    )
    from workflows.policy import run_details
    from workflows.policy import search_attributes as attributes
    from workflows.policy.context_guard import evaluate_context_window
    from workflows.policy.failure_kind import failure_label
    from workflows.policy.failure_text import reply_cut_text
    from workflows.policy.loop_detection import (
        NOT_STUCK,
        LoopLevel,
        LoopState,
        LoopVerdict,
        check_call,
        record_call,
        record_outcome,
        warning_to_emit,
    )
    from workflows.policy.provider_window import merged_windows
    from workflows.policy.run_limits import turn_limit_reached
    from workflows.policy.tool_policy import ToolSelection, select_tools
    from workflows.run_context import CONTEXT_RECOVERY_PATCH, ContextRecovery
    from workflows.run_failover import FAILOVER_V2_PATCH, KEYLESS_PROVIDERS, Failover
    from workflows.search_attribute_upserts import SEARCH_ATTRIBUTES_PATCH, CarriedAttributes
    from workflows.subagents import SUBAGENTS_PATCH, Subagents
    from workflows.telemetry import RunTelemetry
    from workflows.tool_hosts import ToolHosts


# Runs recorded before the context window guard started without it.
CONTEXT_GUARD_PATCH = "context-window-guard"
# Runs recorded before the tool policy offered every tool and read no policy.
TOOL_POLICY_PATCH = "tool-policy"
# A model that keeps calling tools loop detection blocks is stopped after this many blocks: the
# block message is its chance to change course, not an invitation to loop for 48 hours.
MAX_BLOCKED_CALLS = 3


def model_failure(err: ActivityError, req_model: str) -> ModelFailure | None:
    """The classified failure of a model call (a provider error, or the idle limit), if that is
    what failed the activity."""
    cause = err.cause
    if not isinstance(cause, ApplicationError):
        return None
    if cause.type == MODEL_PROVIDER_ERROR and cause.details:
        return ModelFailure.model_validate(cause.details[0])
    if cause.type == MODEL_IDLE_TIMEOUT:
        if cause.details:
            return ModelFailure.model_validate(cause.details[0])
        # Reported by a worker from before idle timeouts carried their details.
        provider, _, model = req_model.partition("/")
        return ModelFailure(
            reason="timeout",
            message=cause.message,
            raw_message=cause.message,
            provider=provider,
            model=model,
            idle_timed_out=True,
        )
    return None


def _failure(err: ActivityError) -> LoopEnd:
    cause = err.cause
    if isinstance(cause, ApplicationError):
        if cause.type == MODEL_IDLE_TIMEOUT:
            return LoopEnd(
                TerminationReason.IDLE_TIMEOUT_120S,
                ExecutionError(
                    kind=ExecutionErrorKind.TIMEOUT,
                    message="The model did not produce a response before the LLM idle timeout. "
                    "Please try again.",
                    detail=cause.message,
                ),
            )
        if cause.type == MODEL_PROVIDER_ERROR and cause.details:
            failure = ModelFailure.model_validate(cause.details[0])
            kind = {
                "rate_limit": ExecutionErrorKind.QUOTA_EXCEEDED,
                "billing": ExecutionErrorKind.BILLING,
                "auth": ExecutionErrorKind.AUTH,
                "auth_permanent": ExecutionErrorKind.AUTH,
            }.get(failure.reason, ExecutionErrorKind.RUNTIME_ERROR)
            return LoopEnd(
                TerminationReason.ERROR,
                ExecutionError(kind=kind, message=failure.message, failure=failure),
            )
        kind = {
            WORKSPACE_MISSING: ExecutionErrorKind.VALIDATION_FAILED,
            CONFIG_ERROR: ExecutionErrorKind.RUNTIME_UNAVAILABLE,
            MODEL_PROVIDER_ERROR: ExecutionErrorKind.RUNTIME_ERROR,
        }.get(cause.type or "", ExecutionErrorKind.UNKNOWN)
        return LoopEnd(TerminationReason.ERROR, ExecutionError(kind=kind, message=cause.message))
    if isinstance(cause, TimeoutError):
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(kind=ExecutionErrorKind.TIMEOUT, message=f"{err.message}: {cause}"),
        )
    return LoopEnd(
        TerminationReason.ERROR,
        ExecutionError(kind=ExecutionErrorKind.UNKNOWN, message=f"{err.message}: {cause}"),
    )


@workflow.defn(name="AgentRunWorkflow")
class AgentRunWorkflow(LegacyFailover):
    @workflow.init
    def __init__(self, inp: RunInput) -> None:
        self.req = inp.request
        # Which changes are in force (the level its input names, else one marker per segment:
        # workflows/patches.py).
        self.patches = Patches(RUN_CODE)
        now = workflow.now()
        self.c = inp.carry or RunCarry(
            started_at=now,
            deadline=now + timedelta(seconds=inp.request.budget_seconds),
            pending_user=list(inp.request.prompt),
            workspace_host=inp.request.workspace_host,
        )
        self.phase = RunPhase.STARTING
        self.announce: list[Announcement] = list(self.c.announce)
        self.c.announce = []
        self.abort_reason: str | None = None
        # Who asked for the abort (the client's identity, "gateway token ops"), when said.
        self.aborted_by: str | None = None
        # The turn's model call answered but the turn has not ended (its tools run): it counts.
        self.turn_open = False
        self.waiting_until: float | None = None
        self.waiting_reason: str | None = None
        # Loop detection's state lives here as a model; it is dumped into the carry only when the
        # run continues as new (not on every tool call).
        self.loops = LoopState.model_validate(self.c.loops)
        # The first model call of each run segment names the workspace; it records it for the
        # calls after it.
        self.workspace_recorded = False
        self.failover = Failover(self)
        # Whether this run decides failures with `Failover` (every run recorded since); None
        # until first asked, so runs that never fail leave no marker in their history.
        self.failover_v2: bool | None = None
        self.context_recovery = ContextRecovery(self, self.failover.model)
        # Whether context overflows are recovered from (every run recorded since); None until
        # first asked, as above.
        self.recovers_context: bool | None = None
        # Whether this run upserts its search attributes (every run recorded since); None until
        # first asked, as above.
        self.upserts_attributes: bool | None = None
        self.attributes = CarriedAttributes()
        # The counters are upserted at most once a minute while the run works; a new segment
        # (continue-as-new) waits its minute too.
        self.counters_at = workflow.time()
        # The reason of the latest failed model call: AgentLastError while the run deals with it.
        self.failure_reason: str | None = None
        self.telemetry = RunTelemetry(self.req)
        # The tool policy's selections so far (`tools()`), by model and senders.
        self.tool_selections: dict[tuple[str, str, tuple[str | None, ...]], ToolSelection] = {}
        self.subagents = Subagents(self)
        # Calls that wait for a person's yes (issue 21, `[tools.approval]`).
        self.approvals = ApprovalWait(self)
        # Where tool calls run: the host with the workspace (workflows/tool_hosts.py).
        self.tool_hosts = ToolHosts(self)

    # -- messages ---------------------------------------------------------------------------

    @workflow.signal
    def steer(self, turn: UserTurn) -> None:
        if turn.entry_id in self.c.seen_steer:
            return
        self.c.seen_steer.append(turn.entry_id)
        if turn.sender is not None and turn.sender not in self.c.steer_senders:
            self.c.steer_senders.append(turn.sender)
        self.c.steer.append(turn)
        self.telemetry.steered(turn)

    @workflow.signal
    def abort(self, reason: str, by: str | None = None) -> None:
        # `by` is a second argument (not a model) so signals recorded before it still decode.
        if self.abort_reason is None:
            self.aborted_by = by
        self.abort_reason = reason or "abort requested"

    @workflow.signal
    def decide_approval(self, decision: ApprovalDecision) -> None:
        self.approvals.decide(decision)

    @workflow.query
    def progress(self) -> RunProgress:
        return RunProgress(
            run_id=self.req.run_id,
            phase=self.phase,
            turn_index=self.c.turn_index,
            tool_calls=self.c.tool_calls,
            usage=self.c.usage.accumulated,
            last_call_usage=self.c.usage.last_call,
            pending_steer=len(self.c.steer),
            profile_id=self.c.profile_id,
            rotations=self.c.failover_iterations,
            thinking=self._thinking(),
            waiting_until=self.waiting_until,
            waiting_reason=self.waiting_reason,
            fallback_model=self.failover.fallback_model(),
        )

    # -- lifecycle events -------------------------------------------------------------------

    def _emit(self, kind: EventKind, turn_index: int | None = None, **fields: object) -> None:
        """Queue a lifecycle event; it travels to the stream with the next activity."""
        # Turn events ride in every step's input (so in history) and go out with the very next
        # activity: they take its time when published rather than carry the workflow's.
        per_turn = kind in (EventKind.TURN_START, EventKind.TURN_END)
        if kind == EventKind.WARNING:
            data = fields.get("data")
            fields["data"] = {**(data if isinstance(data, dict) else {}), "n": self.next_warning()}
        self.announce.append(
            Announcement(
                kind=kind,
                ts=None if per_turn else workflow.now().timestamp(),
                turn_index=turn_index,
                **fields,
            )
        )

    def next_warning(self) -> int:
        self.c.warnings += 1
        return self.c.warnings

    def show(self, text: str) -> None:
        """What the run is doing, on its page in the Temporal UI; a wait says until when."""
        until = self.waiting_until if self.phase == RunPhase.WAITING else None
        self.tell(run_details.step(self.c.turn_index, text, until))
        # Failover and context recovery say here what they changed (waiting, compacting, a new
        # profile or model): what the run's page shows and what the UI's list finds change
        # together.
        self._upsert_attributes()

    def tell(self, line: str) -> None:
        """The run's page in the Temporal UI: `line` (what it does now), then which run on which
        model. No history event, no search attribute."""
        workflow.set_current_details(
            run_details.run_page(line, self.req.run_id, self.failover.model().label())
        )

    def _upsert_attributes(self, end: ExecutionResult | None = None) -> None:
        """Search attributes that changed (workflows/policy/search_attributes.py): phase,
        model, profile, error as they change; counters at the end or at most once a minute."""
        if self.upserts_attributes is None:
            self.upserts_attributes = self.patches(SEARCH_ATTRIBUTES_PATCH)
        if not self.upserts_attributes:
            return
        now = workflow.time()
        every = self.req.counters_upsert_seconds or attributes.COUNTER_INTERVAL_SECONDS
        with_counters = end is not None or attributes.counters_due(self.counters_at, now, every)
        values = {
            sa.PHASE.name: attributes.ENDED if end else attributes.run_phase(self.phase),
            sa.MODEL.name: self.failover.model().label(),
            sa.AUTH_PROFILE.name: self.c.profile_id,
            sa.LAST_ERROR.name: (
                attributes.run_end_error(end.status, end.error) if end else self.failure_reason
            ),
            **attributes.counters(self._turns_counted(end is not None), self.c.usage.accumulated),
        }
        changed = attributes.changes(self.attributes.values(), values, with_counters=with_counters)
        if with_counters and attributes.COUNTERS & changed.keys():
            self.counters_at = now
        self.attributes.upsert_changes(changed)

    def _turns_counted(self, ended: bool) -> int:
        """The run's turns as its end counts them (a turn whose model call answered counts, its
        tools run or not); while it works, the turns before the one in progress."""
        if ended and self.turn_open and self.patches(TURNS_AT_END_PATCH):
            return self.c.turn_index + 1
        return self.c.turn_index

    def _v2(self) -> bool:
        if self.failover_v2 is None:
            self.failover_v2 = self.patches(FAILOVER_V2_PATCH)
        return self.failover_v2

    def _recovers(self) -> bool:
        if self.recovers_context is None:
            self.recovers_context = self.patches(CONTEXT_RECOVERY_PATCH)
        return self.recovers_context

    def _take_announce(self) -> list[Announcement]:
        taken, self.announce = self.announce, []
        return taken

    # -- the run ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: RunInput) -> ExecutionResult:
        self.patches.start(inp.code)
        self.c.trace = self.telemetry.open(self.c.trace, self.c.segments)
        self.telemetry.attach()
        unreadable: LoopEnd | None = None
        if inp.carry is None:
            unreadable = await self._read_tool_policy()
            self._emit(
                EventKind.AGENT_START,
                data={
                    "model": self.req.model.label(),
                    "tools": self.tools().offered,
                    "thinking": self.req.thinking,
                    "source": self.req.source.value,
                },
            )
            unknown = self.tools().unknown_entries
            if unknown:
                # SPEC §13.3: an allowlist entry that names no tool only warns (a typo there
                # silently allows nothing).
                self._emit(
                    EventKind.WARNING,
                    text=f"tool policy: no tool is named {', '.join(map(repr, unknown))}",
                    data={"code": "unknown_tool_names", "names": unknown},
                )
        workflow.set_current_details(f"run **{self.req.run_id}** on {self.req.model.label()}")
        held = self.req.abort_at_start
        if inp.carry is None and held is not None:
            # Aborted before it was made: it ends so before anything is sent to a model.
            self.abort_reason, self.aborted_by = held.reason, held.by
            return await self._finish(LoopEnd(TerminationReason.ABORT_SIGNAL))
        if inp.carry is None:
            unusable = (
                unreadable or self._check_context_window() or await self._choose_model_and_profile()
            )
            if unusable is not None:
                return await self._finish(unusable)
        loop = asyncio.create_task(self._loop())
        remaining = (self.c.deadline - workflow.now()).total_seconds()
        end: LoopEnd
        try:
            if remaining <= 0:
                raise builtins.TimeoutError
            await workflow.wait_condition(
                lambda: loop.done() or self.abort_reason is not None,
                timeout=remaining,
                timeout_summary="run budget (48 h)",
            )
            if loop.done():
                end = loop.result()
            else:
                end = await self._stop(loop)
        except builtins.TimeoutError:
            await self._stop(loop, budget=True)
            end = LoopEnd(
                TerminationReason.TIMEOUT_48H,
                ExecutionError(
                    kind=ExecutionErrorKind.TIMEOUT,
                    message="The run reached its time budget and was stopped.",
                ),
            )
        except asyncio.CancelledError:
            # Cancelled through Temporal (UI, CLI or a parent closing): end like an abort.
            self.abort_reason = self.abort_reason or "run cancelled"
            end = await self._stop(loop)
        # An abort that arrives with the hand-over wins over it: the next segment would only
        # start to stop.
        if end.continue_as_new and self.abort_reason is None:
            await workflow.wait_condition(workflow.all_handlers_finished)
            self.c.segments += 1
            self.telemetry.handed_over()
            workflow.continue_as_new(
                RunInput(request=self.req, carry=self._carry_for_next(), code=newest(RUN_CODE))
            )
        if not self.patches(FINISH_SHIELDED_PATCH):
            return await self._finish(end)
        # A cancel that arrives while the run records its end (a parent that told its sub-agent
        # to stop, then cancels it) must not cut the record short: the run ends as it decided,
        # its result recorded, not as a bare "Canceled".
        finishing = asyncio.ensure_future(self._finish(end))
        while True:
            try:
                return await asyncio.shield(finishing)
            except asyncio.CancelledError:
                if finishing.done():
                    raise

    def _carry_for_next(self) -> RunCarry:
        # Lifecycle events not yet published go out with the next segment's first activity.
        return self.c.model_copy(
            update={
                "announce": self._take_announce(),
                "loops": self.loops.model_dump(mode="json"),
            }
        )

    async def _stop(self, loop: asyncio.Task[LoopEnd], budget: bool = False) -> LoopEnd:
        """Cancel what the loop is waiting on and wait for it to stop.

        A cancel can lose the race with the activity it targets: the result arrives first and the
        loop carries on. That is why the loop also checks `abort_reason` at every safe point; the
        cancel only shortens the wait for a step that is still running."""
        if not budget:
            await self.subagents.tell_stop(self.abort_reason or "aborted", self.aborted_by)
        loop.cancel()
        ended: LoopEnd | None = None
        try:
            ended = await loop
        except (asyncio.CancelledError, ActivityError, CancelledError):
            pass
        if budget:
            return LoopEnd(TerminationReason.TIMEOUT_48H)
        if ended is not None and ended.reason not in (None, TerminationReason.ERROR):
            return ended  # the step in flight finished the run first
        # The run ends as the abort it was asked to be, also when the step failed instead of
        # taking the cancel (its worker died: the cancel ended as a heartbeat timeout). A call
        # left unanswered may have been running, half done: a tool never run again is said
        # to have maybe run, not "not executed" (a model would run it again).
        return LoopEnd(TerminationReason.ABORT_SIGNAL, unanswered=Unanswered.NOT_EXECUTED)

    # -- the tool policy (SPEC §13; decisions in workflows/policy/tool_policy) ------------------

    async def _read_tool_policy(self) -> LoopEnd | None:
        """Once, at the run's start: the policy's layers from the worker's config (a change to
        the config applies from the next run on). None: read (or a run recorded before it)."""
        if not self.patches(TOOL_POLICY_PATCH):
            return None
        first = self.req.prompt[0] if self.req.prompt else None
        try:
            self.c.tool_policy = await workflow.execute_local_activity(
                READ_TOOL_POLICY,
                ToolPolicyRequest(
                    agent_id=self.req.agent_id,
                    routing=first.routing if first else Routing(),
                    sender=first.sender if first else None,
                ),
                result_type=ToolPolicyInput,
                start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                retry_policy=opts.FINISH_RETRY,
                summary="tool policy",
            )
        except ActivityError as err:
            return _failure(err)
        except ApplicationError as err:
            # A local activity's non-retryable failure arrives as itself (as in the session's
            # local activities), not wrapped in an ActivityError.
            return LoopEnd(
                TerminationReason.ERROR,
                ExecutionError(kind=ExecutionErrorKind.RUNTIME_UNAVAILABLE, message=err.message),
            )
        return None

    def tools(self) -> ToolSelection:
        """The tools the next model call is offered (SPEC §13.3): the run's tools through the
        policy's layers for the model in use now (a fallback model has its provider's layers),
        and the owner-only rule for every sender of the run so far."""
        model = self.failover.model()
        senders = {t.sender for t in self.req.prompt}
        senders.update(self.c.steer_senders, (t.sender for t in self.c.steer))
        # The same inputs give the same selection: computed once per model and set of senders
        # rather than on every step.
        key = (model.provider, model.model, tuple(sorted(senders, key=str)))
        selection = self.tool_selections.get(key)
        if selection is None:
            selection = select_tools(
                self.req.tools, self.c.tool_policy, model.provider, model.model, list(senders)
            )
            selection = self.subagents.with_inherited_refusals(selection)
            self.tool_selections[key] = selection
        return selection

    async def _choose_model_and_profile(self) -> LoopEnd | None:
        """Before the first model call: the model and auth profile to start with (SPEC §4.1,
        §7.6, §8.1), so a profile another session found rate-limited is avoided."""
        if self.req.model.provider in KEYLESS_PROVIDERS:
            return None
        if self._v2():
            return await self.failover.start()
        return await self._choose_initial_profile()

    def _aborted(self) -> bool:
        """A safe point: the loop stops here when an abort (or interrupt) has been accepted."""
        return self.abort_reason is not None

    def _entry_id(self, turn: int) -> str:
        # The chain's first run id survives continue-as-new.
        chain = chain_token_of(workflow.info().first_execution_run_id)
        return assistant_entry_id(self.req.run_id, chain, turn)

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        limit = self.req.continue_as_new_after_events
        if limit is not None and info.get_current_history_length() >= limit:
            return True
        return info.is_continue_as_new_suggested()

    async def _loop(self) -> LoopEnd:
        """The agent loop: model call, then its tools, until the model stops calling tools.
        Every `return` is a way a run ends; every abort check a safe point."""
        while True:
            if self._aborted():  # safe point: before a model call
                return LoopEnd(TerminationReason.ABORT_SIGNAL)
            if turn_limit_reached(self.c.turn_index, self.req.max_turns):
                return self._turn_limit_end()
            if self._continue_as_new_due():
                return LoopEnd(continue_as_new=True)
            turn = self.c.turn_index
            result = await self._call_model(turn)
            if result is None:
                continue  # the same turn again, e.g. with a lower thinking level
            if isinstance(result, LoopEnd):
                return result
            entry_id = self._absorb(turn, result)
            has_tool_calls = bool(result.tool_calls)
            cut = reply_cut_text(result.stop_reason, self.failover.model().label())
            if cut is not None and not has_tool_calls:
                self._emit(EventKind.WARNING, text=cut, data={"code": "reply_cut"})
            if has_tool_calls:
                ended = await self._run_tools(turn, entry_id, result.tool_calls)
                if ended is not None:
                    return ended
            self._emit(EventKind.TURN_END, turn, has_tool_calls=has_tool_calls)
            self.c.turn_index += 1
            self.turn_open = False
            if not has_tool_calls:
                if self.c.steer:
                    continue  # a steering message arrived during the last call: answer it
                return LoopEnd(TerminationReason.NO_TOOL_CALLS)

    async def _call_model(self, turn: int) -> ModelCallResult | LoopEnd | None:
        append = self.c.pending_user + self.c.steer
        self.phase = RunPhase.STREAMING
        announce = self._take_announce()
        # Nothing changed in most steps, and then nothing is upserted.
        self._upsert_attributes()
        # The turn boundary every step has (previous turn's end, this turn's start) travels
        # as two flags rather than two announcements: it is in every step's input.
        close_turn: bool | None = None
        last = announce[-1] if announce else None
        if last and last.kind == EventKind.TURN_END and last.turn_index == turn - 1:
            close_turn = bool(announce.pop().has_tool_calls)
        tools = self.tools()
        self.tell(run_details.calling(turn, self.failover.model().label()))
        try:
            result: ModelCallResult = await workflow.execute_activity(
                CALL_MODEL,
                ModelCallInput(
                    session_key=self.req.session_key,
                    run_id=self.req.run_id,
                    turn_index=turn,
                    workspace="" if self.workspace_recorded else self.req.workspace,
                    create_workspace=self.req.create_workspace,
                    workspace_host=None if self.workspace_recorded else self.c.workspace_host,
                    model=self.failover.model(),
                    thinking=self._thinking(),
                    tools=tools.offered,
                    refusals=tools.refusals,
                    append_user=append,
                    unanswered_reason=self.c.unanswered_reason,
                    assistant_entry_id=self._entry_id(turn),
                    announce=announce,
                    close_turn=close_turn,
                    open_turn=True,
                    idle_timeout_seconds=self.req.idle_timeout_seconds,
                    reasoning_mode=self.req.reasoning_mode,
                    recheck_announce=self.c.recheck_announce,
                    profile_id=self.c.profile_id,
                    allow_cooling=self.failover.allow_cooling(),
                    context_window_cap=self.window_cap(),
                    provider_window=self.context_recovery.provider_window(),
                ),
                result_type=ModelCallResult,
                task_queue=self.subagents.model_queue(),
                start_to_close_timeout=opts.MODEL_CALL_START_TO_CLOSE,
                heartbeat_timeout=opts.HEARTBEAT_TIMEOUT,
                retry_policy=opts.MODEL_CALL_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                # Turns as the CLI counts them (from 1); the stream's turn_index stays 0-based.
                summary=f"turn {turn + 1}: {self.failover.model().label()}",
            )
        except ActivityError as err:
            # A cancelled or failed call may not have published what it carried (a call
            # cancelled before it started published nothing): the run's end publishes it,
            # leaving out what reached the stream (activities/run_finish.py).
            self.announce = [*announce, *turn_boundary(turn, close_turn, True), *self.announce]
            # Whoever gets them next (the call made again, or the run's end) reads back which
            # of them reached the stream.
            self.c.recheck_announce = True
            if isinstance(err.cause, CancelledError):
                raise asyncio.CancelledError from err
            failure = model_failure(err, self.req.model.label())
            if failure is None:
                return _failure(err)
            self.failure_reason = (
                failure_label(failure) if self.patches(PRECISE_FAILURE_PATCH) else failure.reason
            )
            handled, ended = await self._recover_context(failure)
            if handled:
                if ended is None:
                    self.c.recheck_announce = True
                return ended
            if self._v2():
                # Only this model call is made again; tools that already ran stay done.
                ended = await self.failover.after_failure(failure)
                if ended is None:
                    self.c.recheck_announce = True
                return ended
            lowered = self._lower_thinking(err)
            if lowered is not None:
                self.c.thinking = lowered
                self.c.recheck_announce = True
                workflow.set_current_details(
                    f"run **{self.req.run_id}** on {self.req.model.label()}, thinking lowered "
                    f"to {lowered}"
                )
                return None
            if await self._rotate_profile(err):
                self.c.recheck_announce = True
                return None
            return _failure(err)
        self.c.recheck_announce = False
        self.failover.note_success()
        # The user turns are in the transcript now, and unanswered calls have been answered.
        self.c.pending_user = []
        self.c.steer = [t for t in self.c.steer if t not in append]
        return result

    async def _recover_context(self, failure: ModelFailure) -> tuple[bool, LoopEnd | None]:
        """Context recovery (workflows/run_context): whether the failure was the context's to
        recover from, and if so None to make the call again or the run's end."""
        recovery = self.context_recovery
        if failure.reason == "context_overflow" and self._recovers():
            return True, await recovery.after_overflow(failure)
        # A connection that failed is no slow model: compacting would not help (issue 24).
        timed_out = failure.idle_timed_out or (
            failure.reason == "timeout" and failure.transport_kind is None
        )
        due = timed_out and recovery.timeout_compaction_due(failure) and self._recovers()
        if due and await recovery.after_timeout(failure):
            return True, None
        return False, None

    def _check_context_window(self) -> LoopEnd | None:
        """SPEC §9, once per run before any provider call: block a window under 16 000 tokens,
        warn under 32 000."""
        if self.req.context_window is None or not self.patches(CONTEXT_GUARD_PATCH):
            return None
        guard = evaluate_context_window(
            self.req.context_window,
            provider=self.req.model.provider,
            model=self.req.model.model,
            source=self.req.context_window_source,
        )
        if guard.warning is not None:
            workflow.logger.warning(guard.warning)
            self._emit(EventKind.WARNING, text=guard.warning, data={"code": "low_context_window"})
        if guard.block_message is None:
            return None
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(
                kind=ExecutionErrorKind.VALIDATION_FAILED,
                message=f"{guard.block_message} Choose a model with a larger context window "
                "(`agentlane models` lists them) and send the message again.",
            ),
        )

    def window_cap(self) -> int | None:
        """The agent's window cap, sent only when it applies (one field less in every step's
        history otherwise); a fallback model is not capped by the session model's figure."""
        if self.req.context_window_source == "model" or self.c.model is not None:
            return None
        return self.req.context_window

    def _thinking(self) -> str:
        return self.c.thinking or self.req.thinking

    def _absorb(self, turn: int, result: ModelCallResult) -> str:
        """Take what a model call reports into the run's state; return its entry id."""
        self.workspace_recorded = True
        self.turn_open = True
        self.c.unanswered_reason = Unanswered.NOT_EXECUTED
        self.c.usage = self.c.usage.record(result.usage)
        # Every call the model made counts, run or not: a run whose calls were all denied,
        # refused or aborted did not make "0 tool calls".
        self.c.tool_calls += len(result.tool_calls)
        entry_id = result.entry_id or self._entry_id(turn)
        self.c.last_entry_id = entry_id
        if result.reply_preview or not result.tool_calls:
            self.c.reply_preview = result.reply_preview
        return entry_id

    async def _run_tools(
        self, turn: int, entry_id: str, calls: list[ToolCallRef]
    ) -> LoopEnd | None:
        """The model's tool calls in order. Calls not run (abort, steering, a loop block) are
        answered by the next model call or by finish_run, so the transcript stays valid."""
        self.phase = RunPhase.TOOLS
        spawned: set[str] = set()
        for i, call in enumerate(calls):
            if call.rejected and self.patches(REJECTED_COUNTED_PATCH):
                # Answered already by the model call; counted, so a model that makes it again
                # and again is blocked and stopped instead of looping for the run's 48 hours.
                ended = self._count_rejected(turn, call)
                if ended is not None:
                    return ended
                continue
            if call.rejected or call.id in spawned:
                continue
            if self._aborted():  # safe point: after the model call, between two tools
                return LoopEnd(TerminationReason.ABORT_SIGNAL)
            if self.c.steer:
                # Steering: remaining calls are answered as skipped by the next model call,
                # which then sees the user's new message.
                self.c.unanswered_reason = Unanswered.SKIPPED_FOR_STEER
                return None
            verdict = self._check_loop(turn, call)
            if verdict.blocked:
                # The next model call answers this call (and any after it in this turn) with
                # the detector's message.
                self.c.unanswered_reason = verdict.message
                self.c.blocked_calls += 1
                if self.c.blocked_calls >= MAX_BLOCKED_CALLS:
                    return self._stopped_for_loop(verdict.message)
                return None
            if call.name == SPAWN_TOOL and self.patches(SUBAGENTS_PATCH):
                # This call and the spawns right after it run at once (workflows/subagents).
                batch = [call]
                for later in calls[i + 1 :]:
                    if later.name != SPAWN_TOOL or later.rejected:
                        break
                    batch.append(later)
                spawned.update(c.id for c in batch)
                await self.subagents.run_calls(turn, entry_id, batch)
                continue
            # A call `[tools.approval]` names waits here, durably, for a person's decision.
            ran = await self.approvals.gate(turn, entry_id, call)
            if ran is None:
                ran = await self._run_tool(
                    turn, entry_id, call.id, call.name, call.summary, call.task_queue
                )
            if isinstance(ran, LoopEnd):
                return ran
            self._record_outcome(call, ran)
        return None

    def _turn_limit_end(self) -> LoopEnd:
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(
                kind=ExecutionErrorKind.TOOL_ERROR,
                message=f"The run reached its turn limit ({self.req.max_turns}) and was stopped.",
            ),
        )

    # -- tool-loop detection (SPEC §14; decisions in workflows/policy/loop_detection) ----------

    def _check_loop(self, turn: int, call: ToolCallRef) -> LoopVerdict:
        """Check a call before it runs; record it unless blocked (a blocked call leaves the
        history as it was, as in the original, so the block holds)."""
        config = self.req.loop_detection
        if not call.signature:
            return NOT_STUCK  # recorded by code from before loop detection: nothing to compare
        state = self.loops
        verdict = check_call(state, call.name, call.signature, call.known_poll, config)
        if verdict.level != LoopLevel.NONE:
            emit, state = warning_to_emit(state, verdict)
            if emit or verdict.blocked:
                self._emit(
                    EventKind.TOOL_LOOP,
                    turn,
                    text=verdict.message,
                    data={
                        "level": verdict.level.value,
                        "detector": verdict.detector.value if verdict.detector else None,
                        "count": verdict.count,
                        "tool_name": call.name,
                        "tool_call_id": call.id,
                        "blocked": verdict.blocked,
                    },
                )
                workflow.logger.warning("tool loop (%s): %s", verdict.level.value, verdict.message)
                # Shown on the run's page in the Temporal UI.
                workflow.set_current_details(
                    f"run **{self.req.run_id}** on {self.req.model.label()}; tool loop "
                    f"{verdict.level.value} ({verdict.detector.value if verdict.detector else ''}, "
                    f"{verdict.count} calls): {verdict.message[:200]}"
                )
        if not verdict.blocked:
            state = record_call(state, call.name, call.signature, call.id, call.known_poll, config)
        self.loops = state
        return verdict

    def _count_rejected(self, turn: int, call: ToolCallRef) -> LoopEnd | None:
        verdict = self._check_loop(turn, call)
        if verdict.blocked:
            self.c.blocked_calls += 1
            if self.c.blocked_calls >= MAX_BLOCKED_CALLS:
                return self._stopped_for_loop(verdict.message)
            return None
        # Its outcome is its rejection, the same each time for the same call.
        self.loops = record_outcome(
            self.loops,
            call.id,
            call.name,
            call.signature,
            f"rejected:{call.signature}",
            self.req.loop_detection,
        )
        return None

    def _record_outcome(self, call: ToolCallRef, outcome: ToolCallOutcome) -> None:
        if not outcome.outcome_hash:
            return
        self.loops = record_outcome(
            self.loops,
            call.id,
            call.name,
            call.signature,
            outcome.outcome_hash,
            self.req.loop_detection,
        )

    def _stopped_for_loop(self, message: str) -> LoopEnd:
        return LoopEnd(
            TerminationReason.ERROR,
            ExecutionError(
                kind=ExecutionErrorKind.TOOL_ERROR,
                message=f"Stopped: the model kept repeating tool calls that loop detection "
                f"blocked ({MAX_BLOCKED_CALLS} blocks). {message}",
            ),
            unanswered=message,
        )

    async def _run_tool(
        self,
        turn: int,
        entry_id: str,
        call_id: str,
        name: str,
        summary: str,
        owner_queue: str = "",
    ) -> LoopEnd | ToolCallOutcome:
        inp = ToolCallInput(
            session_key=self.req.session_key,
            run_id=self.req.run_id,
            turn_index=turn,
            workspace=self.req.workspace,
            assistant_entry_id=entry_id,
            tool_call_id=call_id,
            tool_name=name,
        )
        outcome: ToolCallOutcome | LoopEnd
        self.tell(run_details.running_tool(turn, name, summary, workflow.time()))
        try:
            if owner_queue:
                # About a background process: on the worker that holds it.
                outcome = await self._run_on_owner(inp, summary, owner_queue)
            else:
                # On the host with the workspace, waiting for it if it is gone (tool_hosts.py).
                outcome = await self.tool_hosts.run(name, inp, summary)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise asyncio.CancelledError from err
            return _failure(err)
        return outcome

    async def _run_on_owner(
        self, inp: ToolCallInput, summary: str, owner_queue: str
    ) -> ToolCallOutcome | LoopEnd:
        """A call about a background process, on the queue of the worker that holds it. A worker
        that does not take it in time is gone (and its processes with it): the call then goes
        where any tool call goes (the workspace's host), which reports the process lost."""
        try:
            outcome: ToolCallOutcome = await workflow.execute_activity(
                tool_activity_name(inp.tool_name),
                self.tool_hosts.input_for(inp),
                result_type=ToolCallOutcome,
                task_queue=owner_queue,
                schedule_to_start_timeout=opts.OWNER_SCHEDULE_TO_START,
                start_to_close_timeout=opts.tool_start_to_close(inp.tool_name),
                heartbeat_timeout=opts.HEARTBEAT_TIMEOUT,
                retry_policy=opts.TOOL_RETRY,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                summary=summary,
            )
            return outcome
        except ActivityError as err:
            lost = isinstance(err.cause, TimeoutError) and (
                err.cause.type == TimeoutType.SCHEDULE_TO_START
            )
            if not lost:
                raise
        gone = inp.model_copy(update={"owner_gone": True})
        return await self.tool_hosts.run(inp.tool_name, gone, f"{summary} (its worker is gone)")

    async def _finish(self, end: LoopEnd) -> ExecutionResult:
        self.phase = RunPhase.FINISHING
        reason = end.reason or TerminationReason.ERROR
        status = {
            TerminationReason.NO_TOOL_CALLS: ExecutionStatus.SUCCESS,
            TerminationReason.ABORT_SIGNAL: ExecutionStatus.ABORTED,
        }.get(reason, ExecutionStatus.ERROR)
        if reason == TerminationReason.ABORT_SIGNAL and end.error is None:
            end.error = aborted_error(self.abort_reason, self.aborted_by)
        # As the CLI counts them: a turn whose model call answered counts, tools or not.
        turns = self.c.turn_index + int(self.turn_open)
        keyed = self.failover.model().provider not in KEYLESS_PROVIDERS
        if status == ExecutionStatus.SUCCESS and keyed and self._v2():
            await self.failover.succeeded()
        # The error (if any) comes first: agent_end is always a run's last event, where
        # watchers stop.
        if end.error is not None and status == ExecutionStatus.ERROR:
            self._emit(
                EventKind.ERROR,
                text=end.error.message,
                recoverable=end.error.kind == ExecutionErrorKind.TIMEOUT,
                data={"code": end.error.kind.value},
            )
        self._emit(
            EventKind.AGENT_END,
            termination_reason=reason.value,
            data={
                "total_turns": turns,
                "total_tokens": self.c.usage.accumulated.total,
                "cost": cost_label(self.c.usage.accumulated.cost),
                "duration_ms": int((workflow.now() - self.c.started_at).total_seconds() * 1000),
                "status": status.value,
            },
        )
        result = ExecutionResult(
            session_key=self.req.session_key,
            run_id=self.req.run_id,
            status=status,
            termination_reason=reason,
            reply=self.c.reply_preview,
            turns=turns,
            tool_calls=self.c.tool_calls,
            usage=self.c.usage,
            started_at=self.c.started_at,
            ended_at=workflow.now(),
            error=end.error,
            last_entry_id=self.c.last_entry_id,
            # The model that answered: none when the run ended on the models' failure (the
            # last one tried did not answer, and the session's model stays what it was).
            fallback_model=(
                None
                if end.error is not None and end.error.failure is not None
                else self.failover.fallback_model()
            ),
            profile_pin=self.failover.result_pin() if keyed and self._v2() else None,
            source=self.req.source,
            workspace_host=self.c.workspace_host,
            provider_windows=merged_windows(self.req.provider_windows, self.c.provider_windows),
        )
        workflow.set_current_details(
            run_details.ended(
                self.req.run_id,
                status.value,
                reason.value,
                turns=turns,
                tokens=self.c.usage.accumulated.total,
                cost=cost_label(self.c.usage.accumulated.cost),
                # How it ended, and for an abort who asked (agentlane/run_outcome.py).
                message=said(result) if end.error is not None else None,
            )
        )
        finish = FinishRunInput(
            result=result,
            unanswered_reason=end.unanswered or Unanswered.RUN_STOPPED,
            announce=self._take_announce(),
            append_user=list(self.c.pending_user),
            recheck_announce=self.c.recheck_announce,
        )
        try:
            if not self.patches(opts.FINISH_AS_ACTIVITY_PATCH) and self.patches(
                opts.LOCAL_ACTIVITIES_PATCH
            ):
                finished = await workflow.execute_local_activity(
                    FINISH_RUN,
                    finish,
                    result_type=FinishRunResult,
                    start_to_close_timeout=opts.LOCAL_FINISH_START_TO_CLOSE,
                    retry_policy=opts.FINISH_RETRY,
                    summary=f"finish: {reason.value}",
                )
            else:
                finished = await workflow.execute_activity(
                    FINISH_RUN,
                    finish,
                    result_type=FinishRunResult,
                    start_to_close_timeout=opts.FINISH_START_TO_CLOSE,
                    retry_policy=opts.FINISH_RETRY,
                    summary=f"finish: {reason.value}",
                    task_queue=(
                        engine_task_queue(workflow.info().task_queue)
                        if self.patches(ENGINE_QUEUE_PATCH)
                        else None
                    ),
                )
            result.reply = finished.reply
        except ActivityError as err:
            workflow.logger.warning("finish_run failed: %s", err)
        # Steering that arrived after the last model call goes back to the session's queue.
        result.unconsumed = list(self.c.steer)
        self._upsert_attributes(end=result)
        self.telemetry.ended(result)
        self.phase = RunPhase.ENDED
        if status != ExecutionStatus.SUCCESS and self.patches(RUN_FAILS_PATCH):
            # The workflow's own status says how the run ended (agentlane/run_outcome.py).
            raise outcome_failure(result, attributes.error_label(result.error) or status.value)
        return result
