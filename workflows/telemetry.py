"""Spans and metrics recorded by workflow code (issue 12). Side effects only: nothing here decides
anything or issues a command, so it needs no patch and changes no history.

Traces. With tracing on (workers/telemetry.py) the SDK's replay-safe tracer makes span ids from
the workflow's seeded random and never ends a span while replaying, so a run replayed on another
worker after a crash continues the same spans. Each message a session accepts gets a span of its
own (`agentlane.message`); each run is one trace, rooted at `invoke_agent <agent>`, linked to the
messages it answers (the prompt's, and the steering ones as they arrive). Model calls, tool calls
and compactions are spans of the activities (workers/telemetry_interceptor.py), children of the
run's span through the activity headers; a wait for a cooling profile is a span here. A run that
continues as new ends its span and the next segment's span continues the same trace.

With tracing off the tracer is OpenTelemetry's no-op one and the metric meter Temporal's no-op
meter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    import opentelemetry.context
    import opentelemetry.trace
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from agentlane.metrics import AgentMetrics
    from agentlane.run import ExecutionRequest, ExecutionResult, ExecutionStatus, UserTurn

TRACER_NAME = "agentlane"
_PROPAGATOR = TraceContextTextMapPropagator()


def tracer() -> opentelemetry.trace.Tracer:
    return opentelemetry.trace.get_tracer(TRACER_NAME)


def traceparent(span: Span) -> str | None:
    """The W3C traceparent of a recording span (None when tracing is off)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def _context_of(parent: str | None) -> opentelemetry.context.Context:
    if not parent:
        return opentelemetry.context.Context()
    return _PROPAGATOR.extract({"traceparent": parent}, context=opentelemetry.context.Context())


def link_to(parent: str | None) -> Link | None:
    if not parent:
        return None
    ctx = opentelemetry.trace.get_current_span(_context_of(parent)).get_span_context()
    return Link(ctx) if ctx.is_valid else None


def links_of(turns: Sequence[UserTurn]) -> list[Link]:
    return [link for t in turns if (link := link_to(t.traceparent)) is not None]


class WorkflowMetrics:
    """The metric instruments of one workflow execution, made on first use."""

    def __init__(self) -> None:
        self._metrics: AgentMetrics | None = None

    @property
    def m(self) -> AgentMetrics:
        if self._metrics is None:
            self._metrics = AgentMetrics(workflow.metric_meter())
        return self._metrics


@contextmanager
def message_span(session_key: str, mode: str) -> Iterator[Span]:
    """Around a session accepting a message: the span the message's run links to. Its parent is
    whatever the sender propagated (the gateway's request, a client's span), if anything."""
    with tracer().start_as_current_span(
        "agentlane.message",
        kind=SpanKind.CONSUMER,
        attributes={"gen_ai.conversation.id": session_key, "agentlane.message.mode": mode},
        record_exception=False,
    ) as span:
        yield span


class RunTelemetry:
    """A run's span and its metrics."""

    def __init__(self, req: ExecutionRequest) -> None:
        self.req = req
        self.metrics = WorkflowMetrics()
        self.span: Span = opentelemetry.trace.INVALID_SPAN

    def open(self, root: str | None, segment: int) -> str | None:
        """Start the run's span (the first segment's is the trace's root) and return the root's
        traceparent, which later segments carry. Counts the run once, on its first segment."""
        req = self.req
        name = f"invoke_agent {req.agent_id}"
        if segment > 1:
            name += f" (segment {segment})"
        self.span = tracer().start_span(
            name,
            context=_context_of(root),
            kind=SpanKind.INTERNAL,
            links=links_of(req.prompt) if segment == 1 else [],
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.id": req.agent_id,
                "gen_ai.agent.name": req.agent_id,
                "gen_ai.conversation.id": req.session_key,
                "gen_ai.request.model": req.model.model,
                "gen_ai.provider.name": req.model.provider,
                "agentlane.run_id": req.run_id,
                "agentlane.run_number": req.run_number,
                "agentlane.source": req.source.value,
                "agentlane.segment": segment,
            },
        )
        if segment == 1:
            self.metrics.m.run_started(req.source.value, req.agent_id)
            return traceparent(self.span)
        return root

    def attach(self) -> None:
        """Make the run's span the parent of what the run schedules: activities read it from
        the context when their headers are written, and the loop's task copies the context of
        the workflow's main task. Never detached: the main task ends with the run."""
        opentelemetry.context.attach(opentelemetry.trace.set_span_in_context(self.span))

    def steered(self, turn: UserTurn) -> None:
        link = link_to(turn.traceparent)
        if link is not None:
            self.span.add_link(link.context, {"agentlane.link": "steer"})

    def handed_over(self) -> None:
        """Before continue-as-new: this segment's span ends; the next continues the trace."""
        self.span.set_attribute("agentlane.continued_as_new", True)
        self.span.end()

    def ended(self, result: ExecutionResult) -> None:
        usage = result.usage.accumulated
        attributes: dict[str, str | int | float | bool] = {
            "agentlane.status": result.status.value,
            "agentlane.termination_reason": result.termination_reason.value,
            "agentlane.turns": result.turns,
            "agentlane.tool_calls": result.tool_calls,
            "gen_ai.usage.input_tokens": usage.input + usage.cache_read + usage.cache_write,
            "gen_ai.usage.output_tokens": usage.output,
        }
        cost = usage.cost.known
        if cost is not None:
            attributes["agentlane.cost_usd"] = cost
        if result.fallback_model:
            attributes["gen_ai.response.model"] = result.fallback_model
        if result.error is not None:
            attributes["error.type"] = result.error.kind.value
        self.span.set_attributes(attributes)
        if result.status == ExecutionStatus.ERROR and result.error is not None:
            self.span.set_status(Status(StatusCode.ERROR, result.error.kind.value))
        self.span.end()
        self.metrics.m.run_ended(
            result.status.value,
            result.termination_reason.value,
            result.error.kind.value if result.error is not None else "",
            self.req.source.value,
            result.ended_at - result.started_at,
        )

    @contextmanager
    def waiting(self, provider: str, model: str, reason: str, seconds: float) -> Iterator[None]:
        """Around a run's wait for a cooling profile."""
        started = workflow.now()
        self.metrics.m.wait_started(provider, reason, self.req.session_key)
        with tracer().start_as_current_span(
            "agentlane.wait",
            attributes={
                "agentlane.wait.reason": reason,
                "agentlane.wait.planned_seconds": seconds,
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
            },
            record_exception=False,
            set_status_on_exception=False,
        ):
            try:
                yield
            finally:
                self.metrics.m.wait_ended(
                    provider, reason, self.req.session_key, workflow.now() - started
                )

    def rotated(self, provider: str, reason: str) -> None:
        self.metrics.m.rotation(provider, reason)

    def cooled(self, provider: str, reason: str) -> None:
        self.metrics.m.cooldown(provider, reason)


def since(start_epoch: float) -> timedelta:
    return timedelta(seconds=max(0.0, workflow.time() - start_epoch))
