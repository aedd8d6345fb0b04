"""Spans and metrics of model calls, tool calls and compactions, taken around the activities by
a worker interceptor: the activities themselves know nothing of telemetry.

It runs inside the SDK's OpenTelemetry interceptor, which has attached the context the workflow
wrote into the activity's headers, so each span here is a child of the run's span. One span per
attempt: a retried call shows as two spans, the first with its error.

Model-call spans follow the OpenTelemetry GenAI semantic conventions (`chat <model>`,
`gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.*`, `gen_ai.response.
finish_reasons`) plus the auth profile's id (never a key). Prompts, replies and tool output are
left out unless the operator sets `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
"""

from __future__ import annotations

import functools
import json
import os
import time
from datetime import timedelta
from typing import Any

import opentelemetry.trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from agentlane.context_ops import COMPACT_CONTEXT, CompactionInput, CompactionResult
from agentlane.metrics import AgentMetrics
from agentlane.model_calls import CALL_MODEL, ModelCallInput, ModelCallResult
from agentlane.tool_calls import TOOL_ACTIVITY_PREFIX, ToolCallInput, ToolCallOutcome
from agentlane.usage import Usage

TRACER_NAME = "agentlane"
CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# Captured content is cut to this many characters per attribute.
CONTENT_LIMIT = 2000


@functools.cache
def _tracer() -> opentelemetry.trace.Tracer:
    """Made once: the global provider is set before any worker starts."""
    return opentelemetry.trace.get_tracer(TRACER_NAME)


def capture_content() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("true", "1", "yes")


class TelemetryInterceptor(Interceptor):
    def __init__(self, tracing: bool, metrics: bool) -> None:
        self.tracing = tracing
        self.metrics = metrics

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityTelemetry(next, self.tracing, self.metrics, capture_content())


def _failure_reason(err: BaseException) -> str:
    """The classified reason of a failed call (rate_limit, timeout, context_overflow...)."""
    if isinstance(err, CancelledError) or type(err).__name__ == "CancelledError":
        return "cancelled"
    if isinstance(err, ApplicationError):
        details = err.details
        if details and isinstance(details[0], dict) and "reason" in details[0]:
            return str(details[0]["reason"])
        return err.type or "error"
    return type(err).__name__


class _ActivityTelemetry(ActivityInboundInterceptor):
    def __init__(
        self, next: ActivityInboundInterceptor, tracing: bool, metrics: bool, content: bool
    ) -> None:
        super().__init__(next)
        self.tracing = tracing
        self.metrics = metrics
        self.content = content

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        kind = activity.info().activity_type
        arg = input.args[0] if input.args else None
        if kind == CALL_MODEL and isinstance(arg, ModelCallInput):
            return await self._model_call(input, arg)
        if kind.startswith(TOOL_ACTIVITY_PREFIX) and isinstance(arg, ToolCallInput):
            return await self._tool_call(input, arg)
        if kind == COMPACT_CONTEXT and isinstance(arg, CompactionInput):
            return await self._compaction(input, arg)
        return await self.next.execute_activity(input)

    def _span(self, name: str, attributes: dict[str, Any]) -> Any:
        return _tracer().start_as_current_span(
            name,
            kind=SpanKind.CLIENT,
            attributes={k: v for k, v in attributes.items() if v is not None},
            record_exception=False,
            set_status_on_exception=False,
        )

    def _meter(self) -> AgentMetrics:
        return AgentMetrics(activity.metric_meter())

    async def _model_call(self, input: ExecuteActivityInput, inp: ModelCallInput) -> Any:
        info = activity.info()
        provider, model = inp.model.provider, inp.model.model
        started = time.monotonic()
        with self._span(
            f"chat {model}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": model,
                "gen_ai.conversation.id": inp.session_key,
                "agentlane.run_id": inp.run_id,
                "agentlane.turn": inp.turn_index,
                "agentlane.attempt": info.attempt,
                "agentlane.auth_profile": inp.profile_id,
                "agentlane.thinking": inp.thinking,
            },
        ) as span:
            if self.content and inp.append_user:
                span.set_attribute(
                    "gen_ai.input.messages",
                    json.dumps(
                        [
                            {"role": "user", "parts": [{"type": "text", "content": t.text}]}
                            for t in inp.append_user
                        ]
                    )[:CONTENT_LIMIT],
                )
            try:
                result = await self.next.execute_activity(input)
            except BaseException as err:
                reason = _mark_failed(span, err)
                details = getattr(err, "details", None)
                if details and isinstance(details[0], dict):
                    profile = details[0].get("profile_id")
                    if profile:
                        span.set_attribute("agentlane.auth_profile", str(profile))
                    status = details[0].get("status")
                    if status:
                        span.set_attribute("http.response.status_code", int(status))
                if self.metrics:
                    self._meter().model_call(provider, model, reason, _since(started))
                raise
            if isinstance(result, ModelCallResult):
                usage = result.usage
                span.set_attributes(
                    {
                        "gen_ai.response.finish_reasons": [result.stop_reason],
                        "gen_ai.usage.input_tokens": usage.input
                        + usage.cache_read
                        + usage.cache_write,
                        "gen_ai.usage.output_tokens": usage.output,
                        "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
                        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
                        "agentlane.tool_calls": len(result.tool_calls),
                    }
                )
                cost = usage.cost.known
                if cost is not None:
                    span.set_attribute("agentlane.cost_usd", cost)
                if self.content and result.reply_preview:
                    span.set_attribute(
                        "gen_ai.output.messages",
                        json.dumps(
                            [
                                {
                                    "role": "assistant",
                                    "parts": [{"type": "text", "content": result.reply_preview}],
                                }
                            ]
                        )[:CONTENT_LIMIT],
                    )
                if self.metrics:
                    meter = self._meter()
                    meter.model_call(provider, model, "success", _since(started))
                    _spending(meter, provider, model, usage)
            return result

    async def _tool_call(self, input: ExecuteActivityInput, inp: ToolCallInput) -> Any:
        started = time.monotonic()
        with self._span(
            f"execute_tool {inp.tool_name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": inp.tool_name,
                "gen_ai.tool.call.id": inp.tool_call_id,
                "gen_ai.conversation.id": inp.session_key,
                "agentlane.run_id": inp.run_id,
                "agentlane.turn": inp.turn_index,
                "agentlane.attempt": activity.info().attempt,
            },
        ) as span:
            span.set_attribute("gen_ai.tool.type", "function")
            try:
                outcome = await self.next.execute_activity(input)
            except BaseException as err:
                _mark_failed(span, err)
                span.set_attribute("agentlane.tool.outcome", "failed")
                if self.metrics:
                    self._meter().tool_call(inp.tool_name, "failed", _since(started))
                raise
            result = "ok"
            if isinstance(outcome, ToolCallOutcome):
                result = "error" if outcome.is_error else "ok"
                if outcome.replayed:
                    span.set_attribute("agentlane.tool.replayed", True)
                if self.content and outcome.summary:
                    span.set_attribute("agentlane.tool.summary", outcome.summary[:CONTENT_LIMIT])
            span.set_attribute("agentlane.tool.outcome", result)
            if result == "error":
                span.set_status(Status(StatusCode.ERROR, "tool error"))
            if self.metrics:
                self._meter().tool_call(inp.tool_name, result, _since(started))
            return outcome

    async def _compaction(self, input: ExecuteActivityInput, inp: CompactionInput) -> Any:
        with self._span(
            "agentlane.compaction",
            {
                "gen_ai.conversation.id": inp.session_key,
                "gen_ai.request.model": inp.model.model,
                "gen_ai.provider.name": inp.model.provider,
                "agentlane.run_id": inp.run_id,
                "agentlane.compaction.trigger": inp.trigger,
                "agentlane.compaction.number": inp.number,
                "agentlane.attempt": activity.info().attempt,
            },
        ) as span:
            try:
                result = await self.next.execute_activity(input)
            except BaseException as err:
                _mark_failed(span, err)
                if self.metrics:
                    self._meter().compaction(inp.trigger, "failed")
                raise
            if isinstance(result, CompactionResult):
                span.set_attributes(
                    {
                        "agentlane.compaction.outcome": result.outcome.value,
                        "agentlane.compaction.tokens_before": result.tokens_before,
                        "agentlane.compaction.tokens_after": result.tokens_after,
                        "agentlane.compaction.summariser": result.summariser,
                    }
                )
                cost = result.usage.cost.known
                if cost is not None:
                    span.set_attribute("agentlane.cost_usd", cost)
                if self.metrics:
                    meter = self._meter()
                    meter.compaction(inp.trigger, result.outcome.value)
                    # The summariser's calls cost money like any model call.
                    provider, _, model = result.summariser.partition("/")
                    _spending(meter, provider, model or provider, result.usage)
            return result


def _mark_failed(span: Any, err: BaseException) -> str:
    """An attempt that failed: its span says why. Returns the reason (a metric label)."""
    reason = _failure_reason(err)
    span.set_attribute("error.type", reason)
    span.set_status(Status(StatusCode.ERROR, reason))
    return reason


def _spending(meter: AgentMetrics, provider: str, model: str, usage: Usage) -> None:
    """Tokens by kind, and the calls' price (or that they were unpriced)."""
    for kind, count in (
        ("input", usage.input),
        ("output", usage.output),
        ("cache_read", usage.cache_read),
        ("cache_write", usage.cache_write),
    ):
        meter.tokens(provider, model, kind, count)
    if usage.cost.priced_calls or usage.cost.unpriced_calls:
        meter.cost(provider, model, usage.cost.known)


def _since(started: float) -> timedelta:
    return timedelta(seconds=time.monotonic() - started)
