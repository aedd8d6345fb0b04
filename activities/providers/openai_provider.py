"""OpenAI Chat Completions and Responses through the official SDK, as neutral stream events.

`OpenAIChatProvider` also serves any OpenAI-compatible server (vLLM, Ollama, llama.cpp): a model
entry with `api = "openai-compatible"` and a `base_url`, usually with no key. Such a server gets
a placeholder key rather than none, because the SDK would otherwise pick up `OPENAI_API_KEY` from
the environment and send OpenAI's key to a foreign server.

The SDK never retries (`max_retries=0`). Failures become `ProviderError`: the message is
`"<status> <error.message>"` as the TypeScript SDK words it, followed by the error's type and code
in brackets; `code` is `error.code` (else `error.type`); `retry_after_seconds` comes from
`retry-after-ms` / `retry-after`; the key, a profile's header values and values read from `env:`
are scrubbed from every message. Refused connections, timeouts and streams cut mid-way are
`ProviderError(transport=True)`; so is a stream that ends before its finish event.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
)

from activities.providers import sdk_errors, stop_reasons
from activities.providers.base import (
    Credentials,
    Finish,
    ModelRequest,
    ProviderError,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallComplete,
    ToolCallStart,
)
from activities.providers.client_cache import ClientCache
from activities.providers.openai_request import (
    REASONING_META_KEY,
    OpenAIOptions,
    build_chat_body,
    build_responses_body,
)
from activities.providers.request_headers import call_headers, client_key
from activities.providers.thinking_params import check_thinking_supported
from activities.providers.tool_schemas import strip_strict_nulls
from agentlane.config import ApiKind, ModelEntry
from agentlane.usage import Usage

DEFAULT_TIMEOUT_SECONDS = 600.0
# Compatible servers stream reasoning under one of these non-standard delta fields.
_REASONING_FIELDS = ("reasoning_content", "reasoning")


@dataclass
class _Call:
    ordinal: int
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    done: bool = False


@dataclass
class _State:
    calls: dict[Any, _Call] = field(default_factory=dict)
    # The key of the call the last tool-call delta belonged to.
    last_key: Any = None
    # Responses: the reply's reasoning items with their encrypted content, to send back.
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    incomplete_reason: str | None = None
    finished: bool = False


class _OpenAIBase:
    api_label = "openai"

    def __init__(self, entry: ModelEntry, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        self.entry = entry
        self.name = entry.provider
        self.timeout_seconds = timeout_seconds
        self._clients: ClientCache[openai.AsyncOpenAI] = ClientCache()

    @property
    def official(self) -> bool:
        return self.entry.api != ApiKind.OPENAI_COMPATIBLE

    def _options(self, request: ModelRequest) -> OpenAIOptions:
        return OpenAIOptions(
            max_tokens=request.max_output_tokens or self.entry.max_output_tokens,
            thinking_levels=self.entry.capabilities.thinking_levels,
            strict_tools=self.entry.capabilities.strict_tools,
            official=self.official,
            tools=self.entry.capabilities.tools,
        )

    def _prepare(self, request: ModelRequest, credentials: Credentials | None) -> tuple[str, ...]:
        """Checks before any request; returns what messages must not show."""
        check_thinking_supported(
            request.thinking,
            self.entry.capabilities.thinking_levels,
            provider=self.name,
            model=request.model,
        )
        key = credentials.api_key if credentials is not None else None
        sends_none = credentials is not None and credentials.auth_header == "none"
        if not key and not sends_none and self.entry.needs_key:
            raise sdk_errors.missing_key_error(
                provider=self.name,
                model=request.model,
                profile_id=credentials.profile_id if credentials else None,
            )
        return credentials.secrets() if credentials is not None else ()

    def _client(self, credentials: Credentials | None) -> tuple[openai.AsyncOpenAI, dict[str, Any]]:
        """The SDK client, and the `extra_headers` each of its requests takes."""
        base_url = (credentials.base_url if credentials else None) or self.entry.base_url
        api_key = client_key(credentials)
        headers = call_headers(credentials)
        client = self._clients.get(
            (base_url, api_key, headers.cache_key()),
            lambda: openai.AsyncOpenAI(
                api_key=api_key,
                default_headers=headers.client,
                base_url=base_url,
                max_retries=0,
                timeout=self.timeout_seconds,
            ),
        )
        return client, headers.per_request(openai.omit)

    def _convert(
        self, err: Exception, model: str, secrets: tuple[str, ...], started: bool = False
    ) -> Exception:
        if isinstance(err, openai.APIStatusError):
            return _api_error(
                err, err.status_code, provider=self.name, model=model, secrets=secrets
            )
        if isinstance(err, openai.APIConnectionError) or sdk_errors.is_transport_failure(err):
            return sdk_errors.transport_error(
                err, provider=self.name, model=model, secrets=secrets, started=started
            )
        if isinstance(err, openai.APIError):
            # An error event inside a 200 stream: no HTTP status of its own.
            return _api_error(err, None, provider=self.name, model=model, secrets=secrets)
        if isinstance(err, ValueError):  # invalid JSON or an event that fails validation
            return sdk_errors.malformed_stream_error(
                err, provider=self.name, model=model, secrets=secrets
            )
        return err

    def _tool_arguments(self, request: ModelRequest, call: _Call, arguments: str) -> str:
        if not (self.entry.capabilities.strict_tools and self.official):
            return arguments or "{}"
        spec = next((t for t in request.tools if t.name == call.name), None)
        if spec is None:
            return arguments or "{}"
        return strip_strict_nulls(arguments or "{}", spec.parameters)


class OpenAIChatProvider(_OpenAIBase):
    async def stream(
        self, request: ModelRequest, credentials: Credentials | None
    ) -> AsyncIterator[StreamEvent]:
        secrets = self._prepare(request, credentials)
        body = build_chat_body(request, self._options(request))
        client, extra_headers = self._client(credentials)
        state = _State()
        started = False
        try:
            chunks = await client.chat.completions.create(
                **body, stream=True, extra_headers=extra_headers
            )
            async with chunks:
                sdk_errors.check_streamed(
                    chunks.response.headers,
                    provider=self.name,
                    model=request.model,
                    url=str(chunks.response.request.url),
                )
                started = True
                async for chunk in chunks:
                    for out in self._translate(chunk, state):
                        yield out
        except ProviderError:
            raise
        except Exception as err:
            converted = self._convert(err, request.model, secrets, started)
            if converted is err:
                raise
            raise converted from None
        if state.finish_reason is None:
            raise sdk_errors.stream_incomplete_error(
                provider=self.name, model=request.model, missing="finish_reason", secrets=secrets
            )
        for call in sorted(state.calls.values(), key=lambda c: c.ordinal):
            arguments = self._tool_arguments(request, call, "".join(call.parts))
            yield ToolCallComplete(call.ordinal, call.id, call.name, arguments)
        yield Finish(
            stop_reason=stop_reasons.from_openai_chat(
                state.finish_reason, has_tool_calls=bool(state.calls)
            ),
            usage=state.usage,
        )

    def _translate(self, chunk: ChatCompletionChunk, state: _State) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if chunk.usage is not None:
            details = chunk.usage.prompt_tokens_details
            cached = (details.cached_tokens or 0) if details is not None else 0
            state.usage = Usage(
                input=max(0, chunk.usage.prompt_tokens - cached),
                output=chunk.usage.completion_tokens,
                cache_read=cached,
            )
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            extra = delta.model_extra or {}
            for name in _REASONING_FIELDS:
                reasoning = extra.get(name)
                if isinstance(reasoning, str) and reasoning:
                    out.append(ReasoningDelta(reasoning))
                    break
            if delta.content:
                out.append(TextDelta(delta.content))
            for piece in delta.tool_calls or []:
                key = _call_key(piece.index, piece.id, state)
                call = state.calls.get(key)
                function = piece.function
                if call is None:
                    call = _Call(
                        ordinal=len(state.calls),
                        # Empty: the model call gives it one unique in the session.
                        id=piece.id or "",
                        name=(function.name if function else None) or "",
                    )
                    state.calls[key] = call
                    out.append(ToolCallStart(call.ordinal, call.id, call.name))
                state.last_key = key
                if function is not None and function.arguments:
                    call.parts.append(function.arguments)
            if choice.finish_reason is not None:
                state.finish_reason = choice.finish_reason
        return out


def _call_key(index: int | None, call_id: str | None, state: _State) -> Any:
    """Which call a tool-call delta belongs to. OpenAI numbers them (`index`); some compatible
    servers send each call whole without one: then a new id is a new call, and a delta
    without an id continues the last."""
    if index is not None:
        return index
    last = state.calls.get(state.last_key)
    if last is None or (call_id and call_id != last.id):
        return ("unindexed", len(state.calls))
    return state.last_key


class OpenAIResponsesProvider(_OpenAIBase):
    async def stream(
        self, request: ModelRequest, credentials: Credentials | None
    ) -> AsyncIterator[StreamEvent]:
        secrets = self._prepare(request, credentials)
        body = build_responses_body(request, self._options(request))
        client, extra_headers = self._client(credentials)
        state = _State()
        started = False
        try:
            events = await client.responses.create(**body, stream=True, extra_headers=extra_headers)
            async with events:
                sdk_errors.check_streamed(
                    events.response.headers,
                    provider=self.name,
                    model=request.model,
                    url=str(events.response.request.url),
                )
                started = True
                async for event in events:
                    for out in self._translate(request, event, state, secrets):
                        yield out
                    if state.finished:
                        break
        except ProviderError:
            raise
        except Exception as err:
            converted = self._convert(err, request.model, secrets, started)
            if converted is err:
                raise
            raise converted from None
        if not state.finished:
            raise sdk_errors.stream_incomplete_error(
                provider=self.name,
                model=request.model,
                missing="response.completed",
                secrets=secrets,
            )
        yield Finish(
            stop_reason=stop_reasons.from_openai_responses(
                state.incomplete_reason, has_tool_calls=bool(state.calls)
            ),
            usage=state.usage,
            meta={REASONING_META_KEY: state.reasoning} if state.reasoning else {},
        )

    def _translate(
        self, request: ModelRequest, event: object, state: _State, secrets: tuple[str, ...]
    ) -> list[StreamEvent]:
        if isinstance(event, ResponseTextDeltaEvent):
            return [TextDelta(event.delta)] if event.delta else []
        if isinstance(
            event, ResponseReasoningSummaryTextDeltaEvent | ResponseReasoningTextDeltaEvent
        ):
            return [ReasoningDelta(event.delta)] if event.delta else []
        if isinstance(event, ResponseOutputItemAddedEvent):
            item = event.item
            if isinstance(item, ResponseFunctionToolCall):
                call = _Call(ordinal=len(state.calls), id=item.call_id, name=item.name)
                state.calls[item.id or item.call_id] = call
                return [ToolCallStart(call.ordinal, call.id, call.name)]
            return []
        if isinstance(event, ResponseFunctionCallArgumentsDeltaEvent):
            streaming = state.calls.get(event.item_id)
            if streaming is not None:
                streaming.parts.append(event.delta)
            return []
        if isinstance(event, ResponseFunctionCallArgumentsDoneEvent):
            return self._complete(request, state.calls.get(event.item_id), event.arguments)
        if isinstance(event, ResponseOutputItemDoneEvent):
            item = event.item
            if isinstance(item, ResponseReasoningItem) and item.encrypted_content:
                state.reasoning.append(reasoning_item(item))
                return []
            if isinstance(item, ResponseFunctionToolCall):
                return self._complete(
                    request, state.calls.get(item.id or item.call_id), item.arguments
                )
            return []
        if isinstance(event, ResponseCompletedEvent | ResponseIncompleteEvent):
            response = event.response
            if response.usage is not None:
                state.usage = _responses_usage(response.usage)
            if response.incomplete_details is not None:
                state.incomplete_reason = response.incomplete_details.reason
            state.finished = True
            return []
        if isinstance(event, ResponseFailedEvent):
            error = event.response.error
            code = str(error.code) if error is not None else None
            message = error.message if error is not None else "response failed"
            raise self._event_error(request.model, message, code, secrets)
        if isinstance(event, ResponseErrorEvent):
            raise self._event_error(request.model, event.message, event.code, secrets)
        return []

    def _complete(
        self, request: ModelRequest, call: _Call | None, arguments: str
    ) -> list[StreamEvent]:
        if call is None or call.done:
            return []
        call.done = True
        text = self._tool_arguments(request, call, arguments or "".join(call.parts))
        return [ToolCallComplete(call.ordinal, call.id, call.name, text)]

    def _event_error(
        self, model: str, message: str, code: str | None, secrets: tuple[str, ...]
    ) -> ProviderError:
        text = f"{message} (code: {code})" if code else message
        return ProviderError(
            sdk_errors.redact(text, secrets), provider=self.name, model=model, code=code
        )


def reasoning_item(item: ResponseReasoningItem) -> dict[str, Any]:
    """What a reasoning item is sent back as: its id, its encrypted content and its summary
    (the API needs no more, and a summary is what the user saw)."""
    return {
        "type": "reasoning",
        "id": item.id,
        "encrypted_content": item.encrypted_content,
        "summary": [{"type": "summary_text", "text": part.text} for part in item.summary],
    }


def _responses_usage(usage: Any) -> Usage:
    details = getattr(usage, "input_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    written = int(getattr(details, "cache_write_tokens", 0) or 0)
    return Usage(
        input=max(0, int(usage.input_tokens) - cached - written),
        output=int(usage.output_tokens),
        cache_read=cached,
        cache_write=written,
    )


def _api_error(
    err: openai.APIError,
    status: int | None,
    *,
    provider: str,
    model: str,
    secrets: tuple[str, ...],
) -> ProviderError:
    body = err.body
    error_type = err.type
    code = err.code
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        text = str(body["message"])
    elif isinstance(body, (dict, list)):
        text = sdk_errors.compact_json(body)
    elif isinstance(body, str) and body.strip():
        text = body.strip()
    else:
        text = err.message
    if status is None and code is not None and code.isdigit() and 400 <= int(code) < 600:
        # Compatible servers put an HTTP-like status in the code of an in-stream error.
        status = int(code)
    tags = [f"type: {error_type}" if error_type else "", f"code: {code}" if code else ""]
    suffix = ", ".join(t for t in tags if t)
    message = f"{status} {text}" if status is not None else text
    if suffix:
        message = f"{message} ({suffix})"
    headers = err.response.headers if isinstance(err, openai.APIStatusError) else None
    return ProviderError(
        sdk_errors.redact(message, secrets),
        provider=provider,
        model=model,
        status=status,
        code=code or error_type,
        retry_after_seconds=sdk_errors.retry_after_seconds(headers),
    )
