"""A neutral `ModelRequest` as the body of an OpenAI Chat Completions or Responses call (pure).

Chat Completions: system prompt first, user / assistant (with `tool_calls`) / `tool` messages in
transcript order. Official OpenAI takes `max_completion_tokens`; OpenAI-compatible servers (vLLM,
Ollama, llama.cpp) are sent the older `max_tokens`, which they all understand, and never strict
schemas, which few of them enforce.

Responses: the system prompt is `instructions`; the transcript becomes input items (messages,
`function_call`, `function_call_output`); nothing is stored server-side (`store: false`).

Tool results have no error flag in either API; the tool's text already says what went wrong.
They hold text only, so the images a tool result carries (`read` of a PNG...) follow the run of
tool results as a user message with image parts, for a model that sees images; for one that does
not, the tool's text says the image is not shown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from activities.providers.base import ModelRequest, ToolSpec
from activities.providers.thinking_params import openai_reasoning_effort
from activities.providers.tool_call_ids import openai_wire_id
from activities.providers.tool_images import follow_up_text, result_text, tool_images
from activities.providers.tool_schemas import normalize_tool_schema
from agentlane.transcript import Role, ToolCall, TranscriptEntry


@dataclass(frozen=True)
class OpenAIOptions:
    max_tokens: int
    thinking_levels: Sequence[str]
    strict_tools: bool = False
    # False for OpenAI-compatible servers: older parameter names, no strict schemas.
    official: bool = True
    # False for a model that takes no tools: the request's tools are not sent.
    tools: bool = True


# An assistant entry's Responses reasoning items (encrypted), to send back to the same model.
REASONING_META_KEY = "openai_reasoning"


def build_chat_body(request: ModelRequest, options: OpenAIOptions) -> dict[str, Any]:
    """Keyword arguments for `chat.completions.create` (without `stream`)."""
    strict = options.strict_tools and options.official
    messages: list[dict[str, Any]] = []
    system = _system_text(request)
    if system:
        messages.append({"role": "system", "content": system})
    held: list[dict[str, Any]] = []
    for entry in request.entries:
        if entry.role != Role.TOOL and held:
            messages.extend(held)  # after the whole run of tool messages the API requires
            held = []
        messages.extend(_chat_messages(entry, request.images))
        held += _chat_image_messages(entry) if request.images else []
    messages.extend(held)
    body: dict[str, Any] = {"model": request.model, "messages": messages}
    body["max_completion_tokens" if options.official else "max_tokens"] = options.max_tokens
    if request.tools and options.tools:
        body["tools"] = [_chat_tool(tool, strict) for tool in request.tools]
    effort = openai_reasoning_effort(request.thinking, options.thinking_levels)
    if effort is not None:
        body["reasoning_effort"] = effort
    body["stream_options"] = {"include_usage": True}
    return body


def build_responses_body(request: ModelRequest, options: OpenAIOptions) -> dict[str, Any]:
    """Keyword arguments for `responses.create` (without `stream`)."""
    strict = options.strict_tools and options.official
    effort = openai_reasoning_effort(request.thinking, options.thinking_levels)
    # Nothing is stored at OpenAI (`store: false`): a reasoning model's reasoning reaches its
    # next call in a tool-use turn only if its encrypted items are asked for and sent back.
    encrypted = options.official and effort not in (None, "none")
    items: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    for entry in request.entries:
        if entry.role != Role.TOOL and held:
            items.extend(held)
            held = []
        if encrypted:
            items.extend(_reasoning_items(entry, request.model))
        items.extend(_response_items(entry, request.images))
        held += _response_image_items(entry) if request.images else []
    items.extend(held)
    body: dict[str, Any] = {
        "model": request.model,
        "input": items,
        "max_output_tokens": options.max_tokens,
        "store": False,
    }
    system = _system_text(request)
    if system:
        body["instructions"] = system
    if request.tools and options.tools:
        body["tools"] = [_responses_tool(tool, strict) for tool in request.tools]
    if effort is not None:
        reasoning: dict[str, Any] = {"effort": effort}
        if effort != "none":
            reasoning["summary"] = "auto"
        body["reasoning"] = reasoning
    if encrypted:
        body["include"] = ["reasoning.encrypted_content"]
    return body


def _reasoning_items(entry: TranscriptEntry, model: str) -> list[dict[str, Any]]:
    """The encrypted reasoning items an assistant entry of this same model carries (another
    model cannot read them)."""
    stored = entry.meta.get(REASONING_META_KEY) if entry.role == Role.ASSISTANT else None
    if not isinstance(stored, list) or (entry.model or "").split("/", 1)[-1] != model:
        return []
    return [dict(item) for item in stored if isinstance(item, dict)]


def arguments_text(call: ToolCall) -> str:
    return call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)


def _system_text(request: ModelRequest) -> str:
    parts = [request.system] if request.system.strip() else []
    parts += [e.text for e in request.entries if e.role == Role.SYSTEM and e.text.strip()]
    return "\n\n".join(parts)


def _chat_tool(tool: ToolSpec, strict: bool) -> dict[str, Any]:
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": normalize_tool_schema(tool.parameters, "openai", strict=strict),
    }
    if strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def _responses_tool(tool: ToolSpec, strict: bool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": normalize_tool_schema(tool.parameters, "openai", strict=strict),
        "strict": strict,
    }


def _chat_messages(entry: TranscriptEntry, images: bool = False) -> list[dict[str, Any]]:
    if entry.role == Role.USER:
        return [{"role": "user", "content": entry.text}] if entry.text.strip() else []
    if entry.role == Role.TOOL:
        text = result_text(entry, images)
        return [
            {
                "role": "tool",
                "tool_call_id": openai_wire_id(entry.tool_call_id or ""),
                "content": text,
            }
        ]
    if entry.role == Role.ASSISTANT:
        if not entry.text.strip() and not entry.tool_calls:
            return []
        message: dict[str, Any] = {"role": "assistant", "content": entry.text or None}
        if entry.tool_calls:
            message["tool_calls"] = [
                {
                    "id": openai_wire_id(call.id),
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_text(call)},
                }
                for call in entry.tool_calls
            ]
        return [message]
    return []


def _chat_image_messages(entry: TranscriptEntry) -> list[dict[str, Any]]:
    """A tool message holds text only: its images follow in a user message."""
    images = tool_images(entry)
    if not images:
        return []
    content: list[dict[str, Any]] = [{"type": "text", "text": follow_up_text(entry, images)}]
    content += [{"type": "image_url", "image_url": {"url": i.data_url()}} for i in images]
    return [{"role": "user", "content": content}]


def _response_image_items(entry: TranscriptEntry) -> list[dict[str, Any]]:
    images = tool_images(entry)
    if not images:
        return []
    content: list[dict[str, Any]] = [{"type": "input_text", "text": follow_up_text(entry, images)}]
    content += [{"type": "input_image", "image_url": i.data_url()} for i in images]
    return [{"role": "user", "content": content}]


def _response_items(entry: TranscriptEntry, images: bool = False) -> list[dict[str, Any]]:
    if entry.role == Role.USER:
        return [{"role": "user", "content": entry.text}] if entry.text.strip() else []
    if entry.role == Role.TOOL:
        return [
            {
                "type": "function_call_output",
                "call_id": openai_wire_id(entry.tool_call_id or ""),
                "output": result_text(entry, images),
            }
        ]
    if entry.role == Role.ASSISTANT:
        items: list[dict[str, Any]] = []
        if entry.text.strip():
            items.append({"role": "assistant", "content": entry.text})
        items += [
            {
                "type": "function_call",
                "call_id": openai_wire_id(call.id),
                "name": call.name,
                "arguments": arguments_text(call),
            }
            for call in entry.tool_calls
        ]
        return items
    return []
