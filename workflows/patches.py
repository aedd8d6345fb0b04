"""Patch markers: one per workflow run where there used to be one per patch.

Every change to a workflow's command sequence since the first recorded histories sits behind a
`workflow.patched(...)` check, and each check a workflow reaches writes its own marker: three or
four `core_patch` rows on every run's and every session's page in the UI, saying nothing to an
operator. A workflow recorded since this change writes one marker, the newest of its code
levels, first, and every patch that level covers (`patches(X)`) then answers yes without a
marker of its own. A history without any code marker (recorded before, or a workflow in flight
when the worker was upgraded) asks each patch as before, so it replays, and goes on, exactly as
it did.

Code levels are versioned because a level's marker promises the patches that existed when it was
recorded, no more: a patch added later is listed with a new level, so a history recorded under
an older level still asks for it with its own marker (absent in that history: the old
behaviour), and a workflow started since writes only the newest level's marker.

A workflow that our own workflow code starts (a session's runs and event stream, a run's
sub-agents, every continue-as-new) gets its level in its input (`code`) and writes no marker at
all: its input is in its history, so a replay reads the same level. Each marker costs the server
a search-attribute upsert (the SDK's `TemporalChangeVersion`) beside the event: a new session
wrote five (one per run, three per event stream), now one (the session's own, whose first input
comes from a client that may be of another version than the workers). A level this code does
not know fails the workflow task, which is retried until a worker that knows it takes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from temporalio import workflow


@dataclass(frozen=True)
class CodeLevel:
    """One code marker and the patches added with it (the first level covers every patch
    that existed when code markers were introduced)."""

    marker: str
    adds: frozenset[str] = frozenset()


# A run that ends in error or is aborted fails its workflow (agentlane/run_outcome.py); runs
# recorded before completed with the result.
RUN_FAILS_PATCH = "run-fails-on-error"
# Sessions keep the fates of recent and unsettled messages only (workflows/policy/fates.py), and
# `wait_started` answers at once for a message whose fate is no longer kept.
BOUNDED_FATES_PATCH = "session-bounded-fates"

# `wait_started` waits for the message's fate to settle (started, steered, dropped...) instead of
# answering `pending` at once: the caller asked once per run where it asked twice, and a caller
# waiting on a queued message no longer asks every 50 ms (an update, five history events, each).
SETTLED_WAIT_PATCH = "session-wait-started-settles"

# A steer-backlog message the run took as steering is queued again under a transcript id of its
# own (workflows/policy/queue.py `backlog_copy`); before, its follow-up run had no prompt.
STEER_BACKLOG_COPY_PATCH = "session-steer-backlog-copy"

# A failed model call is named precisely while the run goes on (AgentLastError, waiting_reason:
# `connection_refused`, `connection`, `server_error` where the failover reason says `timeout`;
# workflows/policy/failure_kind.py).
PRECISE_FAILURE_PATCH = "run-precise-failure-labels"
# A stream of unreadable events is made again twice, not for the whole wait budget.
MALFORMED_RETRY_PATCH = "run-few-malformed-retries"
# A sub-agent's approval cancelled with it is announced decided on the top-level session's stream.
SUBAGENT_CANCEL_TOLD_PATCH = "run-subagent-approval-cancel-told"

# A run that stops tells its running sub-agents why and who asked (an `abort` signal to each)
# before cancelling them: each then fails as aborted by that person, not as "run cancelled".
ABORT_TELLS_SUBAGENTS_PATCH = "run-abort-tells-sub-agents"

# An overload said inside a stream is made again twice on the same profile, as a 529 is.
STREAM_OVERLOAD_PATCH = "run-stream-overload-retried"

# A session's (or a sub-agent's) background processes are listed for stopping on the host whose
# disk holds its workspace, where their records are (workflows/process_stop.py).
STOP_ON_HOST_PATCH = "stop-processes-on-their-host"
# A cancel that arrives while a run records its end does not cut the record short.
FINISH_SHIELDED_PATCH = "run-finish-not-cut-by-cancel"
# A sub-agent's run starts with its identifying search attributes (key, agent, model, source).
SUBAGENT_ATTRIBUTES_PATCH = "run-subagent-attributes"
# A run's AgentTurns at its end counts the turn it stopped in (as its result does).
TURNS_AT_END_PATCH = "run-turns-at-end"
# Calls the model activity rejected (arguments not JSON, an unknown or refused tool) count for
# loop detection like calls that ran: repeated without end, they are blocked and the run stops.
REJECTED_COUNTED_PATCH = "run-rejected-calls-counted"
# With a fallback configured, transient errors are made again on a model for 30 s of waits
# (FALLBACK_AFTER_SECONDS), not the run's whole wait budget, before the next model is tried.
TRANSIENT_CAP_PATCH = "run-transient-retries-capped-before-fallback"
# A run's finish goes to the engine's own queue (agentlane/run_records.py `engine_task_queue`):
# eight long `exec`s of other sessions held every run's end for their whole length.
ENGINE_QUEUE_PATCH = "run-finish-on-engine-queue"
# A stream that ends without a stop reason is made again twice, as a malformed one is (it was
# made again for the whole wait budget).
INCOMPLETE_RETRY_PATCH = "run-incomplete-stream-tried-twice"
# A provider's Retry-After (or another model's failure widening the window) moves a profile's
# active cooldown out to its end instead of being lost (workflows/policy/auth_profiles.py).
TOLD_COOLDOWN_PATCH = "run-told-cooldown-lengthens"
# A spawn in a session not pinned to a host yet makes the default workspace where its first
# step runs and pins the parent (and so every child) there (workflows/subagents.py).
SPAWN_PINS_PATCH = "run-spawn-pins-the-host"
# A server error said inside a stream (no HTTP status: Anthropic's `api_error` event, an OpenAI
# `server_error` chunk) is made again like its 500 (the run ended at the first one).
STREAM_SERVER_ERROR_PATCH = "run-stream-server-error-made-again"

RUN_CODE: Sequence[CodeLevel] = (
    CodeLevel("run-code-2026-11"),
    CodeLevel(
        "run-code-2026-11-27",
        frozenset({PRECISE_FAILURE_PATCH, MALFORMED_RETRY_PATCH, SUBAGENT_CANCEL_TOLD_PATCH}),
    ),
    CodeLevel(
        "run-code-2026-11-27-eve", frozenset({ABORT_TELLS_SUBAGENTS_PATCH, STREAM_OVERLOAD_PATCH})
    ),
    CodeLevel(
        "run-code-2026-11-27-night",
        frozenset(
            {
                TURNS_AT_END_PATCH,
                STOP_ON_HOST_PATCH,
                SUBAGENT_ATTRIBUTES_PATCH,
                FINISH_SHIELDED_PATCH,
            }
        ),
    ),
    CodeLevel("run-code-2026-11-28", frozenset({REJECTED_COUNTED_PATCH})),
    CodeLevel("run-code-2026-11-28-b", frozenset({TRANSIENT_CAP_PATCH})),
    CodeLevel("run-code-2026-11-28-c", frozenset({ENGINE_QUEUE_PATCH})),
    CodeLevel("run-code-2026-11-28-d", frozenset({INCOMPLETE_RETRY_PATCH})),
    CodeLevel("run-code-2026-11-28-e", frozenset({TOLD_COOLDOWN_PATCH})),
    CodeLevel("run-code-2026-11-28-f", frozenset({SPAWN_PINS_PATCH})),
    CodeLevel("run-code-2026-11-28-g", frozenset({STREAM_SERVER_ERROR_PATCH})),
)
# A run that ended without a result (terminated in Temporal) still counts what its model calls
# spent in its session's totals, read from its transcript (a local activity).
RUN_SPENT_PATCH = "session-counts-abnormal-runs"

# Interrupts run in the order they were sent (behind those already waiting at the head), and
# steering a run ended without taking is queued again under its own message number (its fate
# then follows it) behind them (workflows/policy/queue.py `with_interrupt`, `with_requeued`).
QUEUE_ORDER_PATCH = "session-queue-order-kept"

# `dedupe:prompt` compares by text a message whose id a client made up (it has no channel id).
PROMPT_DEDUPE_PATCH = "session-prompt-dedupe-by-text"

# A message sent after `close` while the queue still drains joins it (the close waits for it
# too); one that arrives as the session ends is told so, and the client sends it again.
CLOSING_TAKES_PATCH = "session-closing-takes-messages"

# A run that ended without a result (terminated in Temporal) has its end announced on the
# stream by its session (watchers stop at a run's `agent_end`).
ABNORMAL_END_TOLD_PATCH = "session-announces-abnormal-ends"

# The queue cap drops the oldest messages by number, accepted interrupts last (it took the
# queue's head, where interrupts wait: workflows/policy/queue.py `apply_cap`).
CAP_BY_AGE_PATCH = "session-cap-drops-oldest"

SESSION_CODE: Sequence[CodeLevel] = (
    CodeLevel("session-code-2026-11"),
    CodeLevel("session-code-2026-11-26", frozenset({BOUNDED_FATES_PATCH})),
    CodeLevel("session-code-2026-11-26-wait", frozenset({SETTLED_WAIT_PATCH})),
    CodeLevel("session-code-2026-11-27", frozenset({STEER_BACKLOG_COPY_PATCH})),
    CodeLevel("session-code-2026-11-27-eve", frozenset({RUN_SPENT_PATCH})),
    CodeLevel(
        "session-code-2026-11-27-night",
        frozenset(
            {
                QUEUE_ORDER_PATCH,
                PROMPT_DEDUPE_PATCH,
                CLOSING_TAKES_PATCH,
                STOP_ON_HOST_PATCH,
                ABNORMAL_END_TOLD_PATCH,
            }
        ),
    ),
    CodeLevel("session-code-2026-11-28", frozenset({CAP_BY_AGE_PATCH})),
)
# A stream segment younger than the server's minimal interval between runs of one workflow id
# does not hand over (workflows/session_events.py).
EVENTS_SETTLED_ROLLOVER_PATCH = "events-rollover-when-settled"
# The event stream's other patches (workflows/session_events.py) predate its first level.
EVENTS_CODE: Sequence[CodeLevel] = (
    CodeLevel("events-code-2026-11-26"),
    CodeLevel("events-code-2026-11-27", frozenset({EVENTS_SETTLED_ROLLOVER_PATCH})),
)


def newest(levels: Sequence[CodeLevel]) -> str:
    """The level this code writes into the inputs of the workflows it starts."""
    return levels[-1].marker


class UnknownCodeLevel(Exception):
    """A workflow started by newer code than this worker's. Not a Temporal failure type, so it
    fails the workflow task (retried), not the workflow."""


def not_covered(levels: Sequence[CodeLevel], level: int) -> frozenset[str]:
    """The patches that code level `level` (an index into `levels`; -1: none) does not cover."""
    return frozenset().union(*(lv.adds for lv in levels[level + 1 :]))


class Patches:
    def __init__(self, levels: Sequence[CodeLevel]) -> None:
        self.levels = levels
        self.level = -1
        self.uncovered: frozenset[str] = frozenset()
        self.from_input = False

    def start(self, code: str | None = None) -> None:
        """At the start of each workflow run (each continue-as-new segment), before any other
        check, with the level its input names. Without one, asks the newest level's marker
        first: a fresh workflow writes that marker alone; a replayed one answers no to every
        level its history lacks."""
        markers = [level.marker for level in self.levels]
        if code is not None:
            if code not in markers:
                raise UnknownCodeLevel(
                    f"this workflow was started at code level {code!r}, which this worker's "
                    f"code does not know (it knows {', '.join(markers)}): upgrade the worker"
                )
            self.level = markers.index(code)
            self.from_input = True
        else:
            self.level = -1
            for index in range(len(markers) - 1, -1, -1):
                if workflow.patched(markers[index]):
                    self.level = index
                    break
        self.uncovered = not_covered(self.levels, self.level)

    def own_marker(self, patch_id: str) -> bool:
        """A patch that histories recorded under a code marker still asked with its own marker
        (`workflow.patched` called outside this object): asked so again, except by a workflow
        whose input names its level (no marker at all; every patch of its time in force)."""
        return self.from_input or workflow.patched(patch_id)

    def __call__(self, patch_id: str) -> bool:
        """Whether the change behind `patch_id` is in force for this workflow run."""
        if self.level >= 0 and patch_id not in self.uncovered:
            return True
        return workflow.patched(patch_id)
