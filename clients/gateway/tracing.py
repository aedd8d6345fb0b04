"""The gateway's span for each message it takes (tracing on: `serve` sets it up from the same
OTEL_* variables as a worker). An adapter that sends a W3C `traceparent` header gets the
message's trace under its own; the span's context travels to the session through the Temporal
client's headers, so the session's `agentlane.message` span is its child.

FastAPI (0.16x) traces HTTP requests by itself when the OTEL_* variables are set, and then has
read the `traceparent` already: this span is a child of its request span. Without that, the
header is read here."""

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
    current = opentelemetry.trace.get_current_span().get_span_context()
    parent = (
        None
        if current.is_valid
        else _PROPAGATOR.extract({k.lower(): v for k, v in request.headers.items()})
    )
    with opentelemetry.trace.get_tracer("agentlane.gateway").start_as_current_span(
        "agentlane.gateway.send",
        context=parent,
        kind=SpanKind.SERVER if parent is not None else SpanKind.INTERNAL,
        attributes={
            "http.request.method": request.method,
            "http.route": route,
            "gen_ai.conversation.id": session_key,
        },
    ):
        yield
