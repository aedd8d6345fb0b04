"""Anthropic Messages API through the official SDK, streamed, as neutral stream events.

The SDK never retries (`max_retries=0`): retries are the workflow's decision. Failures become
`ProviderError` with the facts the API gave: the message is `"<status> <JSON body>"` as the
TypeScript SDK words it (so `"type":"overloaded_error"` and "prompt is too long: N tokens > M
maximum" stay visible to the classifier), `code` is `error.type`, `retry_after_seconds` comes from
`retry-after`. The key, a profile's header values and values read from `env:` are scrubbed from
every message. Transport failures (refused connection, timeout, a stream cut or stalled mid-way)
are `ProviderError(transport=True)`. A stream that ends without `message_stop` is one of those.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anthropic
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import TextDelta as SdkTextDelta

from activities.providers import sdk_errors, stop_reasons
from activities.providers.anthropic_request import THINKING_META_KEY, build_messages_body
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
from activities.providers.request_headers import CallHeaders, call_headers, client_key
from activities.providers.thinking_params import check_thinking_supported
from agentlane.config import ModelEntry
from agentlane.usage import Usage

DEFAULT_TIMEOUT_SECONDS = 600.0


@dataclass
class _ToolBlock:
    ordinal: int
    id: str
    name: str
    parts: list[str] = field(default_factory=list)
    # Input normally streams as input_json_delta; a start block may already carry all of it.
    prefilled: bool = False


@dataclass
class _StreamState:
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    tools: dict[int, _ToolBlock] = field(default_factory=dict)
    tool_count: int = 0
    finished: bool = False
    # Thinking blocks with their signatures, by content-block index, to send back next turn.
    thinking: dict[int, dict[str, Any]] = field(default_factory=dict)


class AnthropicProvider:
    def __init__(self, entry: ModelEntry, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS):
        self.entry = entry
        self.name = entry.provider
        self.timeout_seconds = timeout_seconds
        self._clients: ClientCache[anthropic.AsyncAnthropic] = ClientCache()

    async def stream(
        self, request: ModelRequest, credentials: Credentials | None
    ) -> AsyncIterator[StreamEvent]:
        model = request.model
        check_thinking_supported(
            request.thinking,
            self.entry.capabilities.thinking_levels,
            provider=self.name,
            model=model,
        )
        keyed = credentials is not None and (
            bool(credentials.api_key) or credentials.auth_header == "none"
        )
        if not keyed and self.entry.needs_key:
            raise sdk_errors.missing_key_error(
                provider=self.name,
                model=model,
                profile_id=credentials.profile_id if credentials else None,
            )
        # A model declared `key_required = false` (a local server) is called without a key.
        credentials = credentials or Credentials(profile_id=None)
        secrets = credentials.secrets()
        body = build_messages_body(
            request,
            max_tokens=request.max_output_tokens or self.entry.max_output_tokens,
            tools=self.entry.capabilities.tools,
        )
        headers = call_headers(credentials)
        client = self._client(credentials, headers)
        started = False
        try:
            state = _StreamState()
            events = await client.messages.create(
                **body, stream=True, extra_headers=headers.per_request(anthropic.omit)
            )
            async with events:
                sdk_errors.check_streamed(
                    events.response.headers,
                    provider=self.name,
                    model=model,
                    url=str(events.response.request.url),
                )
                started = True
                async for event in events:
                    for out in _translate(event, state):
                        yield out
                    if state.finished:
                        break
        except anthropic.APIStatusError as err:
            raise _status_error(err, provider=self.name, model=model, secrets=secrets) from None
        except anthropic.APIConnectionError as err:
            raise sdk_errors.transport_error(
                err, provider=self.name, model=model, secrets=secrets, started=started
            ) from None
        except ProviderError:
            raise
        except ValueError as err:  # invalid JSON or an event that fails validation
            raise sdk_errors.malformed_stream_error(
                err, provider=self.name, model=model, secrets=secrets
            ) from None
        except Exception as err:
            # The SDK lets errors of the HTTP layer through once the stream has begun.
            if sdk_errors.is_transport_failure(err):
                raise sdk_errors.transport_error(
                    err, provider=self.name, model=model, secrets=secrets, started=started
                ) from None
            raise
        if not state.finished:
            raise sdk_errors.stream_incomplete_error(
                provider=self.name, model=model, missing="message_stop", secrets=secrets
            )
        yield Finish(
            stop_reason=stop_reasons.from_anthropic(
                state.stop_reason, has_tool_calls=state.tool_count > 0
            ),
            usage=state.usage,
            meta=(
                {THINKING_META_KEY: [state.thinking[i] for i in sorted(state.thinking)]}
                if state.thinking
                else {}
            ),
        )

    def _client(self, credentials: Credentials, headers: CallHeaders) -> anthropic.AsyncAnthropic:
        base_url = credentials.base_url or self.entry.base_url
        api_key = client_key(credentials)
        return self._clients.get(
            (credentials.kind, base_url, api_key, headers.cache_key()),
            lambda: self._new_client(credentials.kind, api_key, base_url, headers.client),
        )

    def _new_client(
        self, kind: str, api_key: str, base_url: str | None, headers: dict[str, str]
    ) -> anthropic.AsyncAnthropic:
        # Explicit credentials always: with none the SDK would read ANTHROPIC_API_KEY itself.
        if kind in ("token", "oauth"):
            return anthropic.AsyncAnthropic(
                auth_token=api_key,
                base_url=base_url,
                max_retries=0,
                timeout=self.timeout_seconds,
                default_headers=headers,
            )
        return anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=self.timeout_seconds,
            default_headers=headers,
        )


def _translate(event: object, state: _StreamState) -> list[StreamEvent]:
    if isinstance(event, RawMessageStartEvent):
        state.usage = _usage(event.message.usage, state.usage)
        return []
    if isinstance(event, RawContentBlockStartEvent):
        return _block_start(event, state)
    if isinstance(event, RawContentBlockDeltaEvent):
        return _block_delta(event, state)
    if isinstance(event, RawContentBlockStopEvent):
        tool = state.tools.pop(event.index, None)
        if tool is None:
            return []
        arguments = "".join(tool.parts) or "{}"
        return [ToolCallComplete(tool.ordinal, tool.id, tool.name, arguments)]
    if isinstance(event, RawMessageDeltaEvent):
        if event.delta.stop_reason is not None:
            state.stop_reason = event.delta.stop_reason
        state.usage = _usage(event.usage, state.usage)
        return []
    if isinstance(event, RawMessageStopEvent):
        state.finished = True
    return []


def _block_start(event: RawContentBlockStartEvent, state: _StreamState) -> list[StreamEvent]:
    block = event.content_block
    if isinstance(block, TextBlock):
        return [TextDelta(block.text)] if block.text else []
    if isinstance(block, ThinkingBlock):
        state.thinking[event.index] = {
            "type": "thinking",
            "thinking": block.thinking,
            "signature": block.signature or "",
        }
        return [ReasoningDelta(block.thinking)] if block.thinking else []
    if isinstance(block, RedactedThinkingBlock):
        state.thinking[event.index] = {"type": "redacted_thinking", "data": block.data}
        return []
    if isinstance(block, ToolUseBlock):
        tool = _ToolBlock(ordinal=state.tool_count, id=block.id, name=block.name)
        state.tool_count += 1
        if block.input:
            tool.parts.append(json.dumps(block.input))
            tool.prefilled = True
        state.tools[event.index] = tool
        return [ToolCallStart(tool.ordinal, tool.id, tool.name)]
    return []


def _block_delta(event: RawContentBlockDeltaEvent, state: _StreamState) -> list[StreamEvent]:
    delta = event.delta
    if isinstance(delta, SdkTextDelta):
        return [TextDelta(delta.text)] if delta.text else []
    if isinstance(delta, ThinkingDelta):
        if event.index in state.thinking:
            state.thinking[event.index]["thinking"] += delta.thinking
        return [ReasoningDelta(delta.thinking)] if delta.thinking else []
    if isinstance(delta, InputJSONDelta):
        tool = state.tools.get(event.index)
        if tool is not None:
            if tool.prefilled:
                tool.parts.clear()
                tool.prefilled = False
            tool.parts.append(delta.partial_json)
        return []
    if isinstance(delta, SignatureDelta):
        if event.index in state.thinking:
            state.thinking[event.index]["signature"] += delta.signature
        return []
    return []


def _usage(reported: Any, previous: Usage) -> Usage:
    """Anthropic usage counts are cumulative; a missing field keeps the previous value."""

    def pick(name: str, old: int) -> int:
        value = getattr(reported, name, None)
        return int(value) if isinstance(value, int) else old

    return Usage(
        input=pick("input_tokens", previous.input),
        output=pick("output_tokens", previous.output),
        cache_read=pick("cache_read_input_tokens", previous.cache_read),
        cache_write=pick("cache_creation_input_tokens", previous.cache_write),
    )


def _status_error(
    err: anthropic.APIStatusError, *, provider: str, model: str, secrets: tuple[str, ...]
) -> ProviderError:
    status = err.status_code if err.status_code >= 400 else None  # mid-stream errors come as 200
    body = err.body
    if isinstance(body, (dict, list)):
        text = sdk_errors.compact_json(body)
    elif isinstance(body, str) and body.strip():
        text = body.strip()
    else:
        text = err.message
    message = f"{status} {text}" if status is not None else text
    return ProviderError(
        sdk_errors.redact(message, secrets),
        provider=provider,
        model=model,
        status=status,
        code=err.type,
        retry_after_seconds=sdk_errors.retry_after_seconds(err.response.headers),
    )
