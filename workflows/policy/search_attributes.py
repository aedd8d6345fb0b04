"""Which search attributes to upsert, and when (issue 12).

Every upsert is a history event (UpsertWorkflowSearchAttributes), so the workflows upsert only
what changed since the values they last set, and the counters (turns, tokens, cost) only at a
run's end or at most once a minute of workflow time while it works: never once per step.

The values last set are not kept by the workflows: they are `workflow.info()
.typed_search_attributes`, which the SDK updates on every upsert, which holds what the workflow
was started with (the client's start options, the session's child start), and which the server
carries across continue-as-new (the SDK's default). So nothing extra travels in any state.

Values are plain `str | int | float`; None means "unset" (an attribute removed, or never set):
an unpriced cost is left unset, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentlane import search_attributes as sa
from agentlane.errors import ExecutionErrorKind
from agentlane.run import ExecutionError, ExecutionStatus
from agentlane.search_attribute_values import Value, Values
from agentlane.session import RunPhase
from agentlane.usage import Usage

# Workflow time between two upserts of the counters while a run works.
COUNTER_INTERVAL_SECONDS = 60.0
COUNTERS = frozenset({sa.TURNS.name, sa.TOKENS.name, sa.COST.name})
# Keyword values are capped at 2 KiB by the server; ours are ids and labels, far shorter. A value
# that is not (a pathological channel name) is cut rather than fail the workflow task.
MAX_KEYWORD = 200

# AgentPhase values. A session is idle or running; a run is running, waiting (every profile
# cooling down: a durable timer), compacting, or ended (the workflow has closed or is closing).
IDLE = "idle"
RUNNING = "running"
WAITING = "waiting"
COMPACTING = "compacting"
ENDED = "ended"


def run_phase(phase: RunPhase) -> str:
    if phase == RunPhase.WAITING:
        return WAITING
    if phase == RunPhase.COMPACTING:
        return COMPACTING
    return RUNNING


# Kinds more precise than their failure's reason (`timeout`: workflows/policy/failure_kind.py).
UNREACHABLE = frozenset(
    {
        ExecutionErrorKind.CONNECTION_REFUSED,
        ExecutionErrorKind.CONNECTION,
        ExecutionErrorKind.SERVER_ERROR,
    }
)


def error_label(error: ExecutionError | None) -> str | None:
    """The AgentLastError value of an error: the provider failure's reason when the error
    carries one (rate_limit, overloaded, billing, auth, context_overflow, ...: the words users
    search for), else the execution error's kind (timeout, tool_error, aborted, ...). A provider
    that could not be reached says so (connection_refused, connection), not `timeout`, its
    failover reason: a search for timeouts must not mix dead endpoints with slow models."""
    if error is None:
        return None
    if error.kind in UNREACHABLE:
        return error.kind.value
    if error.failure is not None and error.failure.reason:
        return error.failure.reason
    return error.kind.value


def run_end_error(status: ExecutionStatus, error: ExecutionError | None) -> str | None:
    """AgentLastError after a run: its error, removed when it succeeded."""
    return None if status == ExecutionStatus.SUCCESS else error_label(error)


def counters(turns: int, usage: Usage) -> Values:
    cost = usage.cost.known
    return {
        sa.TURNS.name: turns,
        sa.TOKENS.name: usage.total,
        sa.COST.name: None if cost is None else round(cost, 6),
    }


def identity(
    session_key: str, agent: str, model: str, channel: str | None, **extra: str | None
) -> Values:
    """Who and what: the attributes a session and its runs share (plus a run's own, by name)."""
    return {
        sa.SESSION_KEY.name: session_key,
        sa.AGENT.name: agent,
        sa.MODEL.name: model,
        sa.CHANNEL.name: channel,
        **extra,
    }


def _clean(value: Value | None) -> Value | None:
    if isinstance(value, str):
        return value[:MAX_KEYWORD] or None
    return value


def changes(
    last: Mapping[str, Value | None], current: Mapping[str, Value | None], *, with_counters: bool
) -> Values:
    """The attributes of `current` whose value differs from `last` (None: to unset); counters
    only when `with_counters`. Unsetting what was never set is no change."""
    out: Values = {}
    for name, value in current.items():
        if name in COUNTERS and not with_counters:
            continue
        value = _clean(value)
        if last.get(name) != value:
            out[name] = value
    return out


def counters_due(last_at: float, now: float, interval: float = COUNTER_INTERVAL_SECONDS) -> bool:
    """Whether the counters may be upserted while a run works (workflow time, seconds)."""
    return now - last_at >= interval
