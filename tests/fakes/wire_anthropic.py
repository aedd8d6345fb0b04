"""Anthropic Messages API wire format: SSE stream, non-streaming message, error bodies.

Stream: `message_start`, `ping`, then per content block `content_block_start` / `_delta` /
`_stop` (thinking blocks end with a `signature_delta`; tool_use input arrives as
`input_json_delta` fragments), then `message_delta` (stop reason, cumulative output tokens) and
`message_stop`. Errors: `{"type": "error", "error": {"type": ..., "message": ...},
"request_id": ...}` with a `request-id` header.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.scripts import ErrorKind, Fault, Ids, Part, Reply
from tests.fakes.sse import sse

_STOP = {"end_turn": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}

_ERRORS: dict[str, tuple[str, str]] = {
    "auth": ("authentication_error", "invalid x-api-key"),
    "permission": (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    "billing": (
        "billing_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits.",
    ),
    "quota": (
        "billing_error",
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
        "Billing to upgrade or purchase credits.",
    ),
    "rate_limit": (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50,000 input tokens "
        "per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits. You can "
        "see the response headers for current usage. Please reduce the prompt length or the "
        "maximum tokens requested, or try again later.",
    ),
    "server": ("api_error", "Internal server error"),
    "unavailable": ("api_error", "Service unavailable"),
    "overloaded": ("overloaded_error", "Overloaded"),
    "not_found": ("not_found_error", "model: {model}"),
    "bad_request": ("invalid_request_error", "Invalid request"),
}


def error_body(kind: ErrorKind, fault: Fault, *, model: str, request_id: str) -> dict[str, Any]:
    if kind == "context_overflow":
        error_type = "invalid_request_error"
        prompt, limit = fault.figures()
        message = f"prompt is too long: {prompt} tokens > {limit} maximum"
    elif kind == "thinking_unsupported":
        error_type = "invalid_request_error"
        # Anthropic's own words for a model that takes no `enabled` thinking (it names no list
        # of levels: the client has to find one by itself).
        message = (
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        )
    else:
        error_type, message = _ERRORS[kind]
        message = message.format(model=model)
    return {
        "type": "error",
        "error": {"type": error_type, "message": fault.message or message},
        "request_id": request_id,
    }


class AnthropicRenderer:
    def __init__(self, reply: Reply, *, model: str, input_tokens: int, ids: Ids) -> None:
        self.reply = reply
        self.model = model
        self.input_tokens = input_tokens
        self.ids = ids
        self.message_id = ids.next("msg_fake")
        self.tool_ids = [c.id or ids.next("toolu_fake") for c in reply.tool_calls]
        self.block = -1
        self.block_kind: str | None = None
        self.block_tool = -1

    def _usage(self, output: int) -> dict[str, Any]:
        usage = self.reply.usage
        return {
            "input_tokens": usage.input if usage.input is not None else self.input_tokens,
            "output_tokens": output,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cache_read,
        }

    def start(self) -> list[bytes]:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._usage(1),
        }
        return [
            sse({"type": "message_start", "message": message}, "message_start"),
            sse({"type": "ping"}, "ping"),
        ]

    def part(self, part: Part) -> list[bytes]:
        out: list[bytes] = []
        kind = "tool" if part.kind in ("tool_start", "tool_args") else part.kind
        if kind != self.block_kind or (kind == "tool" and part.tool != self.block_tool):
            out += self._close_block()
            out += self._open_block(kind, part.tool)
        if part.kind == "thinking":
            delta: dict[str, Any] = {"type": "thinking_delta", "thinking": part.text}
        elif part.kind == "text":
            delta = {"type": "text_delta", "text": part.text}
        elif part.kind == "tool_args":
            delta = {"type": "input_json_delta", "partial_json": part.text}
        else:
            return out
        event = {"type": "content_block_delta", "index": self.block, "delta": delta}
        return [*out, sse(event, "content_block_delta")]

    def finish(self) -> list[bytes]:
        stop = _STOP.get(self.reply.stop(), self.reply.stop())
        usage = self._usage(self.reply.output_tokens())
        return [
            *self._close_block(),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": usage,
                },
                "message_delta",
            ),
            sse({"type": "message_stop"}, "message_stop"),
        ]

    def stream_error(self, kind: ErrorKind, fault: Fault) -> list[bytes]:
        body = error_body(kind, fault, model=self.model, request_id=self.ids.next("req_fake"))
        body.pop("request_id")
        return [sse(body, "error")]

    def message(self) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.reply.thinking:
            content.append(
                {"type": "thinking", "thinking": self.reply.thinking, "signature": "sig-fake"}
            )
        if self.reply.text:
            content.append({"type": "text", "text": self.reply.text})
        for call, tool_id in zip(self.reply.tool_calls, self.tool_ids, strict=True):
            arguments = call.arguments if isinstance(call.arguments, dict) else {}
            content.append(
                {"type": "tool_use", "id": tool_id, "name": call.name, "input": arguments}
            )
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": _STOP.get(self.reply.stop(), self.reply.stop()),
            "stop_sequence": None,
            "usage": self._usage(self.reply.output_tokens()),
        }

    def _open_block(self, kind: str, tool: int) -> list[bytes]:
        self.block += 1
        self.block_kind = kind
        self.block_tool = tool
        if kind == "thinking":
            block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "text":
            block = {"type": "text", "text": ""}
        else:
            call = self.reply.tool_calls[tool]
            block = {"type": "tool_use", "id": self.tool_ids[tool], "name": call.name, "input": {}}
        event = {"type": "content_block_start", "index": self.block, "content_block": block}
        return [sse(event, "content_block_start")]

    def _close_block(self) -> list[bytes]:
        if self.block_kind is None:
            return []
        out = []
        if self.block_kind == "thinking":
            delta = {"type": "signature_delta", "signature": "sig-fake-" + self.message_id}
            event = {"type": "content_block_delta", "index": self.block, "delta": delta}
            out.append(sse(event, "content_block_delta"))
        out.append(sse({"type": "content_block_stop", "index": self.block}, "content_block_stop"))
        self.block_kind = None
        return out
