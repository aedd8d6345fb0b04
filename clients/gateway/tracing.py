"""The gateway's span for each message it takes (tracing on: `serve` sets it up from the same
OTEL_* variables as a worker). An adapter that sends a W3C `traceparent` header gets the
message's trace under its own; the span's context travels to the session through the Temporal
client's headers, so the session's `agentlane.message` span is its child."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import opentelemetry.trace
from fastapi import Request
from opentelemetry.trace import SpanKind
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()


@contextmanager
def traced_request(request: Request, route: str, session_key: str) -> Iterator[None]:
    parent = _PROPAGATOR.extract({k.lower(): v for k, v in request.headers.items()})
    with opentelemetry.trace.get_tracer("agentlane.gateway").start_as_current_span(
        route,
        context=parent,
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": request.method,
            "http.route": route,
            "gen_ai.conversation.id": session_key,
        },
    ):
        yield
