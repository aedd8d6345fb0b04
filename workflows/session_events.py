"""SessionEventsWorkflow: hosts one session's Workflow Stream, and nothing else.

Streams cost history (every publish batch is a signal, every subscriber poll an update), so the
stream lives in its own workflow: its growth never crowds the session's or a run's history. It
continues as new early, by history events and bytes (`agentlane/event_stream.py`), carrying the
stream's offsets, its publishers' dedup state and the last few items (bounded in bytes, and
tighter after a run's end, when no watcher that keeps up needs them), with its pollers released
and its signal and update handlers drained first (the SDK's `WorkflowStream.continue_as_new`).
Past half its bounds it hands over at a run's end, when no publish is likely to race it, but
never in a segment's first second: the server would hold the next segment's first task back
until that second is over, and every watcher's poll with it. A
segment's history stays small, so a task that must replay it (a signal racing the hand-over
fails that task with UNHANDLED_COMMAND, and the retry replays) takes milliseconds, not minutes.
Subscribers follow the chain (the SDK's subscriber does that); offsets stay contiguous across
segments.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState

with workflow.unsafe.imports_passed_through():
    from agentlane.event_stream import (
        CARRY_BYTES,
        REST_CARRY_BYTES,
        ROLLOVER_BYTES,
        ROLLOVER_BYTES_BEFORE_REST_CARRY,
        ROLLOVER_EVENTS,
        EventsInput,
        ends_a_run,
    )
    from workflows.patches import EVENTS_CODE, EVENTS_SETTLED_ROLLOVER_PATCH, Patches, newest
    from workflows.policy.history_rollover import HistoryBounds, rollover_due

# The server holds a run that continued as new sooner than this after its previous run began
# (`ContinueAsNewMinInterval`, one second by default) until that second is over; a margin for
# the clocks (workflow time is the workflow task's start, the server's is its own).
SETTLED_AFTER = timedelta(seconds=1.2)
# Streams recorded before segments were bounded continued as new only when Temporal suggested.
EARLY_ROLLOVER_PATCH = "events-early-rollover"
# Before this, a stream continued as new at its bounds whatever was under way.
AT_REST_ROLLOVER_PATCH = "events-rollover-at-rest"
# Before this, a hand-over at rest carried as much as one at the bounds, and segments were
# bounded at 256 KB.
REST_CARRY_PATCH = "events-rest-carry"


def carried_from(state: WorkflowStreamState, keep_items: int, budget: int) -> int:
    """The first offset kept: at most `keep_items` of the newest items, within `budget` bytes."""
    end = state.base_offset + len(state.log)
    first = max(state.base_offset, end - keep_items)
    size = 0
    for i in range(end - 1, first - 1, -1):
        size += len(state.log[i - state.base_offset].data) + 64
        if size > budget:
            return i + 1
    return first


@workflow.defn(name="SessionEventsWorkflow")
class SessionEventsWorkflow:
    @workflow.init
    def __init__(self, inp: EventsInput) -> None:
        self.stream = WorkflowStream(prior_state=inp.stream_state)
        self.closing = False
        self.bounded = False
        self.rest_aware = False
        self.light_rest = False
        self.settled_rollover = False
        self.began = HistoryBounds(0, 0)
        self.patches = Patches(EVENTS_CODE)

    @workflow.signal
    def close(self) -> None:
        self.closing = True

    def _rollover_due(self, inp: EventsInput, settled: bool | None = None) -> bool:
        """`settled`: as if the segment had (or had not) outlived `SETTLED_AFTER`; None: as it
        has."""
        info = workflow.info()
        if settled is None:
            settled = not self.settled_rollover or self._settle_left() is None
        size = inp.continue_as_new_after_bytes or (
            ROLLOVER_BYTES if self.light_rest else ROLLOVER_BYTES_BEFORE_REST_CARRY
        )
        return rollover_due(
            length=info.get_current_history_length(),
            size=info.get_current_history_size(),
            suggested=info.is_continue_as_new_suggested(),
            explicit_events=inp.continue_as_new_after_events,
            bounds=HistoryBounds(ROLLOVER_EVENTS, size) if self.bounded else None,
            at_rest=self._at_rest if self.rest_aware else None,
            began=self.began,
            settled=settled,
        )

    def _settle_left(self) -> timedelta | None:
        """How long this segment has left before it outlives `SETTLED_AFTER`; None once it has."""
        left = SETTLED_AFTER - (workflow.now() - workflow.info().start_time)
        return left if left > timedelta(0) else None

    def _held_for_settling(self, inp: EventsInput) -> timedelta | None:
        """How long a hand-over that is due but for the segment's age waits; None when none is
        (no hand-over due, or one due now)."""
        left = self._settle_left()
        if left is None or not self._rollover_due(inp, settled=True):
            return None
        return left

    async def _until_rollover_due(self, inp: EventsInput) -> None:
        """Until closing or a hand-over is due; a hand-over held back by the segment's age gets a
        timer for what is left of it, since no message may come to ask again."""
        if not self.settled_rollover:
            await workflow.wait_condition(lambda: self.closing or self._rollover_due(inp))
            return
        while not (self.closing or self._rollover_due(inp)):
            held = self._held_for_settling(inp)
            try:
                await workflow.wait_condition(self._wake(inp, held), timeout=held)
            except TimeoutError:
                pass

    def _wake(self, inp: EventsInput, held: timedelta | None) -> Callable[[], bool]:
        """What ends a wait: closing, a hand-over due, or (waiting without a timer) one that
        became due but for the segment's age, which needs a timer."""
        return lambda: (
            self.closing
            or self._rollover_due(inp)
            or (held is None and self._held_for_settling(inp) is not None)
        )

    def _at_rest(self) -> bool:
        """The newest item ends a run: the next publish waits for a new message, a new run and
        its first model call, so a hand-over now is unlikely to race one."""
        log = self.stream._log  # the SDK's WorkflowStream offers no read of its newest item
        return bool(log) and ends_a_run(log[-1].data)

    @workflow.run
    async def run(self, inp: EventsInput) -> None:
        # Which changes are in force: from the input, or one marker (workflows/patches.py).
        self.patches.start(inp.code)
        self.bounded = self.patches(EARLY_ROLLOVER_PATCH)
        self.rest_aware = self.bounded and self.patches(AT_REST_ROLLOVER_PATCH)
        self.light_rest = self.rest_aware and self.patches(REST_CARRY_PATCH)
        self.settled_rollover = self.bounded and self.patches(EVENTS_SETTLED_ROLLOVER_PATCH)
        info = workflow.info()
        self.began = HistoryBounds(
            info.get_current_history_length(), info.get_current_history_size()
        )
        await self._until_rollover_due(inp)
        if self.closing:
            return
        if self.bounded:
            # Items published while handlers drain are carried too; the bound is applied to
            # the state actually handed over.
            await self.stream.continue_as_new(lambda s: [self._next_input(inp, s)])
        state = self.stream.get_state()
        end = state.base_offset + len(state.log)
        self.stream.truncate(max(state.base_offset, end - inp.keep_items))
        await self.stream.continue_as_new(lambda s: [inp.model_copy(update={"stream_state": s})])

    def _next_input(self, inp: EventsInput, state: WorkflowStreamState) -> EventsInput:
        budget = inp.carry_bytes or CARRY_BYTES
        if self.light_rest and self._at_rest():
            # The state is the stream's as it is now, handlers drained: nothing was published
            # after the run's end.
            budget = min(budget, REST_CARRY_BYTES)
        first = carried_from(state, inp.keep_items, budget)
        kept = WorkflowStreamState(
            log=state.log[first - state.base_offset :],
            base_offset=first,
            publishers=state.publishers,
        )
        return inp.model_copy(update={"stream_state": kept, "code": newest(EVENTS_CODE)})
