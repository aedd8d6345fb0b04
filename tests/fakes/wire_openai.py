"""OpenAI wire formats: Chat Completions chunks, Responses events, error bodies.

Chat stream: `data: {chat.completion.chunk}` lines (role first, content / `tool_calls` deltas by
index, a `finish_reason` chunk, then a usage chunk with empty `choices` when the request asked
for `stream_options.include_usage`), ended by `data: [DONE]`. Scripted thinking is sent as
`reasoning_content` deltas, as vLLM and DeepSeek-style servers do.

Responses stream: `response.created`, `response.in_progress`, output items (reasoning with summary
text deltas, a message with `response.output_text.delta`, function calls with
`response.function_call_arguments.delta` / `.done`), then `response.completed` (or
`response.incomplete` for max_tokens) with usage.

Errors: `{"error": {"message", "type", "param", "code"}}` with an `x-request-id` header.
"""

from __future__ import annotations

import time
from typing import Any

from tests.fakes.scripts import ErrorKind, Fault, Ids, Part, Reply, mask_key
from tests.fakes.sse import sse

_CHAT_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def error_body(
    kind: ErrorKind,
    fault: Fault,
    *,
    model: str,
    api: str,
    key: str | None = None,
    effort: str | None = None,
) -> dict[str, Any]:
    error: dict[str, Any] = {"message": "", "type": "invalid_request_error", "param": None}
    error["code"] = None
    if kind == "auth":
        if key:
            error["message"] = (
                f"Incorrect API key provided: {mask_key(key)}. You can find your API key at "
                "https://platform.openai.com/account/api-keys."
            )
            error["code"] = "invalid_api_key"
        else:
            error["message"] = (
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or "
                "as the password field (with blank username) if you're accessing the API from "
                "your browser and are prompted for a username and password. You can obtain an "
                "API key from https://platform.openai.com/account/api-keys."
            )
    elif kind == "permission":
        error.update(
            message="Country, region, or territory not supported",
            type="request_forbidden",
            code="unsupported_country_region_territory",
        )
    elif kind == "billing":
        # OpenAI itself does not answer 402; OpenAI-compatible gateways do, in this shape.
        return {
            "error": {
                "message": fault.message
                or "Insufficient credits. Add more using https://openrouter.ai/settings/credits",
                "code": 402,
            }
        }
    elif kind == "quota":
        error.update(
            message="You exceeded your current quota, please check your plan and billing "
            "details. For more information on this error, read the docs: "
            "https://platform.openai.com/docs/guides/error-codes/api-errors.",
            type="insufficient_quota",
            code="insufficient_quota",
        )
    elif kind == "rate_limit":
        error.update(
            message=f"Rate limit reached for {model} in organization org-fake on tokens per min "
            "(TPM): Limit 30000, Used 30000, Requested 1200. Please try again in 2.4s. Visit "
            "https://platform.openai.com/account/rate-limits to learn more.",
            type="tokens",
            code="rate_limit_exceeded",
        )
    elif kind == "server":
        error.update(
            message="The server had an error while processing your request. Sorry about that!",
            type="server_error",
        )
    elif kind == "unavailable":
        error.update(
            message="The engine is currently overloaded, please try again later.",
            type="server_error",
        )
    elif kind == "overloaded":
        error.update(message="Overloaded", type="overloaded_error")
    elif kind == "context_overflow":
        if api == "openai-responses":
            error.update(
                message="Your input exceeds the context window of this model. Please adjust your "
                "input and try again.",
                param="input",
                code="context_length_exceeded",
            )
        else:
            prompt, limit = fault.figures()
            error.update(
                # Older models' words; newer ones say the Responses wording (`fault.message`).
                message=fault.message
                or f"This model's maximum context length is {limit} tokens. However, your "
                f"messages resulted in {prompt} tokens. Please reduce the length of the messages.",
                param="messages",
                code="context_length_exceeded",
            )
    elif kind == "thinking_unsupported":
        quoted = [f"'{v}'" for v in fault.supported]
        listed = ", ".join(quoted[:-1]) + f", and {quoted[-1]}" if len(quoted) > 1 else quoted[0]
        # Each API names its own parameter in the message, as OpenAI does.
        param = "reasoning.effort" if api == "openai-responses" else "reasoning_effort"
        error.update(
            message=f"Unsupported value: '{param}' does not support '{effort}' with this "
            f"model. Supported values are: {listed}.",
            param=param,
            code="unsupported_value",
        )
    elif kind == "not_found":
        error.update(
            message=f"The model `{model}` does not exist or you do not have access to it.",
            code="model_not_found",
        )
    else:
        error["message"] = "Invalid request"
    if fault.message:
        error["message"] = fault.message
    return {"error": error}


class ChatRenderer:
    def __init__(
        self, reply: Reply, *, model: str, input_tokens: int, ids: Ids, include_usage: bool
    ) -> None:
        self.reply = reply
        self.model = model
        self.input_tokens = input_tokens
        self.include_usage = include_usage
        self.id = ids.next("chatcmpl-fake")
        self.created = int(time.time())
        self.tool_ids = [c.id or ids.next("call_fake") for c in reply.tool_calls]

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse(self._envelope([choice]))

    def _envelope(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": choices,
        }

    def usage(self) -> dict[str, Any]:
        usage = self.reply.usage
        prompt = (usage.input if usage.input is not None else self.input_tokens) + usage.cache_read
        output = self.reply.output_tokens()
        return {
            "prompt_tokens": prompt,
            "completion_tokens": output,
            "total_tokens": prompt + output,
            "prompt_tokens_details": {"cached_tokens": usage.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning, "audio_tokens": 0},
        }

    def start(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": "", "refusal": None})]

    def part(self, part: Part) -> list[bytes]:
        if part.kind == "thinking":
            return [self._chunk({"reasoning_content": part.text})]
        if part.kind == "text":
            return [self._chunk({"content": part.text})]
        call = self.reply.tool_calls[part.tool]
        if part.kind == "tool_start":
            piece = {
                "index": part.tool,
                "id": self.tool_ids[part.tool],
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
        else:
            piece = {"index": part.tool, "function": {"arguments": part.text}}
        return [self._chunk({"tool_calls": [piece]})]

    def finish(self) -> list[bytes]:
        finish = _CHAT_FINISH.get(self.reply.stop(), self.reply.stop())
        out = [self._chunk({}, finish)]
        if self.include_usage:
            out.append(sse({**self._envelope([]), "usage": self.usage()}))
        out.append(sse("[DONE]"))
        return out

    def stream_error(self, kind: ErrorKind, fault: Fault) -> list[bytes]:
        return [sse(error_body(kind, fault, model=self.model, api="openai-chat"))]

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self.reply.text or None,
            "refusal": None,
        }
        if self.reply.thinking:
            message["reasoning_content"] = self.reply.thinking
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": tool_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json()},
                }
                for call, tool_id in zip(self.reply.tool_calls, self.tool_ids, strict=True)
            ]
        finish = _CHAT_FINISH.get(self.reply.stop(), self.reply.stop())
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": self.usage(),
        }


class ResponsesRenderer:
    def __init__(
        self, reply: Reply, *, model: str, input_tokens: int, ids: Ids, encrypted: bool = False
    ) -> None:
        self.reply = reply
        # The request asked for `reasoning.encrypted_content`: reasoning items carry it.
        self.encrypted = encrypted
        self.model = model
        self.input_tokens = input_tokens
        self.ids = ids
        self.id = ids.next("resp_fake")
        self.created = int(time.time())
        self.call_ids = [c.id or ids.next("call_fake") for c in reply.tool_calls]
        self.item_ids = [ids.next("fc_fake") for _ in reply.tool_calls]
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.current_tool = -1
        self.buffer: list[str] = []

    def _event(self, kind: str, **fields: Any) -> bytes:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse(data, kind)

    def _response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        response: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }
        if status in ("completed", "incomplete"):
            response["usage"] = self.usage()
        if status == "incomplete":
            reason = "content_filter" if self.reply.stop() == "refusal" else "max_output_tokens"
            response["incomplete_details"] = {"reason": reason}
        return response

    def usage(self) -> dict[str, Any]:
        usage = self.reply.usage
        base = usage.input if usage.input is not None else self.input_tokens
        total_in = base + usage.cache_read + usage.cache_write
        output = self.reply.output_tokens()
        return {
            "input_tokens": total_in,
            "input_tokens_details": {
                "cached_tokens": usage.cache_read,
                "cache_write_tokens": usage.cache_write,
            },
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": total_in + output,
        }

    def start(self) -> list[bytes]:
        return [
            self._event("response.created", response=self._response("in_progress", [])),
            self._event("response.in_progress", response=self._response("in_progress", [])),
        ]

    def part(self, part: Part) -> list[bytes]:
        out: list[bytes] = []
        kind = "function_call" if part.kind in ("tool_start", "tool_args") else part.kind
        current_kind = self.current["type"] if self.current else None
        wanted = {"thinking": "reasoning", "text": "message"}.get(kind, kind)
        if wanted != current_kind or (kind == "function_call" and part.tool != self.current_tool):
            out += self._close_item()
            out += self._open_item(wanted, part.tool)
        index = len(self.output)
        assert self.current is not None
        item_id = self.current["id"]
        self.buffer.append(part.text)
        if part.kind == "thinking":
            out.append(
                self._event(
                    "response.reasoning_summary_text.delta",
                    item_id=item_id,
                    output_index=index,
                    summary_index=0,
                    delta=part.text,
                )
            )
        elif part.kind == "text":
            out.append(
                self._event(
                    "response.output_text.delta",
                    item_id=item_id,
                    output_index=index,
                    content_index=0,
                    delta=part.text,
                    logprobs=[],
                )
            )
        elif part.kind == "tool_args":
            out.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=part.text,
                )
            )
        return out

    def finish(self) -> list[bytes]:
        out = self._close_item()
        stop = self.reply.stop()
        if stop in ("max_tokens", "refusal"):
            return [
                *out,
                self._event(
                    "response.incomplete", response=self._response("incomplete", self.output)
                ),
            ]
        return [
            *out,
            self._event("response.completed", response=self._response("completed", self.output)),
        ]

    def stream_error(self, kind: ErrorKind, fault: Fault) -> list[bytes]:
        error = error_body(kind, fault, model=self.model, api="openai-responses")["error"]
        return [
            self._event(
                "error",
                code=str(error.get("code") or error.get("type") or "server_error"),
                message=error["message"],
                param=error.get("param"),
            )
        ]

    def message(self) -> dict[str, Any]:
        for part in self.reply.parts():
            self._silent(part)
        self._close_item()
        status = "incomplete" if self.reply.stop() in ("max_tokens", "refusal") else "completed"
        return self._response(status, self.output)

    def _silent(self, part: Part) -> None:
        self.part(part)

    def _open_item(self, kind: str, tool: int) -> list[bytes]:
        index = len(self.output)
        self.buffer = []
        if kind == "reasoning":
            self.current = {"type": "reasoning", "id": self.ids.next("rs_fake"), "summary": []}
            return [
                self._event("response.output_item.added", output_index=index, item=self.current),
                self._event(
                    "response.reasoning_summary_part.added",
                    item_id=self.current["id"],
                    output_index=index,
                    summary_index=0,
                    part={"type": "summary_text", "text": ""},
                ),
            ]
        if kind == "message":
            self.current = {
                "type": "message",
                "id": self.ids.next("msg_fake"),
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            return [
                self._event("response.output_item.added", output_index=index, item=self.current),
                self._event(
                    "response.content_part.added",
                    item_id=self.current["id"],
                    output_index=index,
                    content_index=0,
                    part={"type": "output_text", "text": "", "annotations": [], "logprobs": []},
                ),
            ]
        call = self.reply.tool_calls[tool]
        self.current_tool = tool
        self.current = {
            "type": "function_call",
            "id": self.item_ids[tool],
            "call_id": self.call_ids[tool],
            "name": call.name,
            "arguments": "",
            "status": "in_progress",
        }
        return [self._event("response.output_item.added", output_index=index, item=self.current)]

    def _close_item(self) -> list[bytes]:
        if self.current is None:
            return []
        item, index, text = self.current, len(self.output), "".join(self.buffer)
        out: list[bytes] = []
        if item["type"] == "reasoning":
            out.append(
                self._event(
                    "response.reasoning_summary_text.done",
                    item_id=item["id"],
                    output_index=index,
                    summary_index=0,
                    text=text,
                )
            )
            item = {**item, "summary": [{"type": "summary_text", "text": text}]}
            if self.encrypted:
                item["encrypted_content"] = f"enc:{item['id']}"
        elif item["type"] == "message":
            content = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            out.append(
                self._event(
                    "response.output_text.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    text=text,
                    logprobs=[],
                )
            )
            item = {**item, "status": "completed", "content": [content]}
        else:
            out.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=text,
                )
            )
            item = {**item, "status": "completed", "arguments": text}
        out.append(self._event("response.output_item.done", output_index=index, item=item))
        self.output.append(item)
        self.current = None
        self.buffer = []
        return out
