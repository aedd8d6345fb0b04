"""A step's trace context travels in its activity's input instead of a header.

The SDK's OpenTelemetry plugin writes the workflow's trace context into a header of every
activity it schedules. The Temporal server stores and hands on that header with the task, and a
header costs it far more than the same bytes in the input: on the dev server, a 90-byte header on
a no-op loop's activity took the server's CPU a step from 8.6 to 9.5 ms and from 9.6 to 11.3 ms
(two runs), while 250 bytes more of input changed nothing measurable. In an engine step tracing
went from about 1.065x to 1.035x (README, Benchmarks).

So, for inputs that can hold it (`TraceCarrier`: the run's step inputs and the compaction's),
the context moves from the header into the input as the activity is scheduled, and back into
the header as the activity starts, before the plugin reads it: the plugin, the activity and the
spans see what they saw before; only the server never sees the header. A context with more than
a traceparent (a tracestate, baggage) keeps its header, and so does every other call (child
workflows, signals, activities whose input is not a `TraceCarrier`).

Where it sits: listed on the client before the plugin, its workflow outbound runs after the
plugin's (which has written the header by then) and its activity inbound before the plugin's
(which reads it).
"""

from __future__ import annotations

from typing import Any

import temporalio.client
import temporalio.converter
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    StartActivityInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from agentlane.wire import TraceCarrier

# The header the SDK's plugin writes (temporalio.contrib.opentelemetry), a payload of the
# propagator's carrier in the default converter's JSON.
TRACE_HEADER = "_tracer-data"
_CONVERTER = temporalio.converter.PayloadConverter.default


def carried_traceparent(arg: Any, header: Payload | None) -> str | None:
    """The traceparent to move into `arg`, or None when the header must stay as it is."""
    if header is None or not isinstance(arg, TraceCarrier) or arg.traceparent is not None:
        return None
    carrier = _CONVERTER.from_payloads([header])[0]
    if not isinstance(carrier, dict) or set(carrier) != {"traceparent"}:
        return None
    value = carrier["traceparent"]
    return value if isinstance(value, str) else None


def _into_input(input: StartActivityInput | StartLocalActivityInput) -> None:
    if not input.args:
        return
    traceparent = carried_traceparent(input.args[0], input.headers.get(TRACE_HEADER))
    if traceparent is None:
        return
    input.args = [input.args[0].model_copy(update={"traceparent": traceparent}), *input.args[1:]]
    input.headers = {k: v for k, v in input.headers.items() if k != TRACE_HEADER}


class _Outbound(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        _into_input(input)
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        _into_input(input)
        return super().start_local_activity(input)


class _WorkflowInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_Outbound(outbound))


class _ActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        arg = input.args[0] if input.args else None
        if (
            isinstance(arg, TraceCarrier)
            and arg.traceparent is not None
            and TRACE_HEADER not in input.headers
        ):
            carrier = {"traceparent": arg.traceparent}
            input.headers = {**input.headers, TRACE_HEADER: _CONVERTER.to_payloads([carrier])[0]}
        return await self.next.execute_activity(input)


class TraceCarriage(temporalio.client.Interceptor, Interceptor):
    """Give it to the client before the OpenTelemetry plugin (a client interceptor, so that the
    plugin's worker configuration keeps it, and ahead of the plugin's own)."""

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        return _WorkflowInbound

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityInbound(next)
