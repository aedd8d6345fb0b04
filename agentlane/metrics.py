"""Our metrics (issue 12), recorded through Temporal's metric meter so they leave by the same
Prometheus endpoint as the SDK's own (`AGENTLANE_METRICS_ADDRESS`, workers/telemetry.py).

Workflow code records through `workflow.metric_meter()`, which records nothing while a history is
replayed: a worker that takes over a session does not count its past again. Activity code (the
telemetry interceptor in workers/) records through `activity.metric_meter()`: every attempt of a
call is counted, as the provider counts it.

Label values are ids and kinds only (provider, model, reason...): never a key or any text.
Temporal adds `namespace`, `task_queue` and `workflow_type` / `activity_type` to each.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.common import MetricMeter

# The names, as Prometheus shows them (counters get no `_total` suffix from Temporal's exporter).
RUNS_STARTED = "agentlane_runs_started"
RUNS_ENDED = "agentlane_runs_ended"
RUN_DURATION = "agentlane_run_duration"
MODEL_CALLS = "agentlane_model_calls"
MODEL_CALL_DURATION = "agentlane_model_call_duration"
TOKENS = "agentlane_tokens"
COST = "agentlane_cost_usd"
UNPRICED_CALLS = "agentlane_unpriced_model_calls"
TOOL_CALLS = "agentlane_tool_calls"
ROTATIONS = "agentlane_profile_rotations"
COOLDOWNS = "agentlane_profile_cooldowns"
WAITS = "agentlane_waits"
WAIT_DURATION = "agentlane_wait_duration"
RUNS_WAITING = "agentlane_run_waiting"
COMPACTIONS = "agentlane_compactions"
ABORT_LATENCY = "agentlane_abort_latency"
QUEUE_DEPTH = "agentlane_queue_depth"
MESSAGES = "agentlane_messages"

ALL_NAMES = (
    RUNS_STARTED,
    RUNS_ENDED,
    RUN_DURATION,
    MODEL_CALLS,
    MODEL_CALL_DURATION,
    TOKENS,
    COST,
    UNPRICED_CALLS,
    TOOL_CALLS,
    ROTATIONS,
    COOLDOWNS,
    WAITS,
    WAIT_DURATION,
    RUNS_WAITING,
    COMPACTIONS,
    ABORT_LATENCY,
    QUEUE_DEPTH,
    MESSAGES,
)

Labels = dict[str, str | int | float | bool]


class AgentMetrics:
    """The instruments on one meter, made once and reused (each creation crosses into the SDK's
    core)."""

    def __init__(self, meter: MetricMeter) -> None:
        self._meter = meter
        self._made: dict[str, Any] = {}

    def _counter(self, name: str, description: str, unit: str | None = None) -> Any:
        if name not in self._made:
            self._made[name] = self._meter.create_counter(name, description, unit)
        return self._made[name]

    def _histogram_ms(self, name: str, description: str) -> Any:
        if name not in self._made:
            self._made[name] = self._meter.create_histogram_timedelta(name, description, "ms")
        return self._made[name]

    def _gauge(self, name: str, description: str) -> Any:
        if name not in self._made:
            self._made[name] = self._meter.create_gauge(name, description)
        return self._made[name]

    def _histogram_float(self, name: str, description: str, unit: str) -> Any:
        if name not in self._made:
            self._made[name] = self._meter.create_histogram_float(name, description, unit)
        return self._made[name]

    # -- runs -----------------------------------------------------------------------------

    def run_started(self, source: str, agent: str) -> None:
        self._counter(RUNS_STARTED, "agent runs started").add(1, {"source": source, "agent": agent})

    def run_ended(
        self, status: str, reason: str, error_kind: str, source: str, duration: timedelta
    ) -> None:
        labels: Labels = {
            "status": status,
            "reason": reason,
            "error_kind": error_kind or "none",
            "source": source,
        }
        self._counter(RUNS_ENDED, "agent runs ended, by status and termination reason").add(
            1, labels
        )
        self._histogram_ms(RUN_DURATION, "agent run duration").record(duration, labels)

    # -- model calls ----------------------------------------------------------------------

    def model_call(self, provider: str, model: str, outcome: str, duration: timedelta) -> None:
        labels: Labels = {"provider": provider, "model": model, "outcome": outcome}
        self._counter(MODEL_CALLS, "model call attempts, by outcome").add(1, labels)
        self._histogram_ms(MODEL_CALL_DURATION, "model call duration").record(duration, labels)

    def tokens(self, provider: str, model: str, kind: str, count: int) -> None:
        if count > 0:
            self._counter(TOKENS, "tokens, by kind (input, output, cache_read, cache_write)").add(
                count, {"provider": provider, "model": model, "kind": kind}
            )

    def cost(self, provider: str, model: str, usd: float | None) -> None:
        """Histogram of each call's price: its `_sum` is the money spent. Calls of a model
        without prices are counted apart, never as $0."""
        labels: Labels = {"provider": provider, "model": model}
        if usd is None:
            self._counter(UNPRICED_CALLS, "model calls of models without prices").add(1, labels)
            return
        self._histogram_float(COST, "price of each model call", "USD").record(usd, labels)

    def tool_call(self, tool: str, outcome: str, duration: timedelta) -> None:
        self._counter(TOOL_CALLS, "tool calls, by outcome").add(
            1, {"tool": tool, "outcome": outcome}
        )

    def compaction(self, trigger: str, outcome: str) -> None:
        self._counter(COMPACTIONS, "context compactions, by trigger and outcome").add(
            1, {"trigger": trigger, "outcome": outcome}
        )

    # -- failover -------------------------------------------------------------------------

    def rotation(self, provider: str, reason: str) -> None:
        self._counter(ROTATIONS, "auth-profile rotations, by failure reason").add(
            1, {"provider": provider, "reason": reason}
        )

    def cooldown(self, provider: str, reason: str) -> None:
        self._counter(COOLDOWNS, "auth profiles marked cooling down or disabled").add(
            1, {"provider": provider, "reason": reason}
        )

    def wait_started(self, provider: str, reason: str, session: str) -> None:
        self._counter(WAITS, "runs waiting for a cooling profile").add(
            1, {"provider": provider, "reason": reason}
        )
        self._gauge(RUNS_WAITING, "1 while the session's run waits for a profile").set(
            1, {"session": session}
        )

    def wait_ended(self, provider: str, reason: str, session: str, waited: timedelta) -> None:
        self._gauge(RUNS_WAITING, "1 while the session's run waits for a profile").set(
            0, {"session": session}
        )
        self._histogram_ms(WAIT_DURATION, "time runs waited for a profile").record(
            waited, {"provider": provider, "reason": reason}
        )

    # -- sessions -------------------------------------------------------------------------

    def message(self, mode: str, disposition: str) -> None:
        self._counter(MESSAGES, "messages accepted, by mode and what became of them").add(
            1, {"mode": mode, "disposition": disposition}
        )

    def queue_depth(self, session: str, depth: int) -> None:
        self._gauge(QUEUE_DEPTH, "messages waiting in the session's queue").set(
            depth, {"session": session}
        )

    def abort_latency(self, latency: timedelta) -> None:
        self._histogram_ms(ABORT_LATENCY, "from an abort's acceptance to its run's end").record(
            latency
        )
