"""A neutral `ModelRequest` as the body of an Anthropic Messages API call (pure, no I/O).

* user entries -> user messages; assistant entries -> assistant messages with text and
  `tool_use` blocks; tool entries -> `tool_result` blocks (`is_error` kept). Consecutive entries
  that land on the same role are merged into one message, so several tool results (and a user
  message right after them) form a single user turn, as the API requires alternating roles.
* Images a tool result carries (`read` of a PNG...) are image blocks inside its `tool_result`
  for a model that sees images, a note in its text for one that does not.
* Empty text is left out: the API rejects empty text blocks.
* Signed thinking blocks are replayed when an assistant entry carries them in
  `meta["anthropic_thinking"]` (a list of `thinking` / `redacted_thinking` blocks): the API
  needs them back during a tool-use turn with thinking on.
* The system prompt is sent as one cached text block, so a long prompt is billed as a cache read
  on the next call.
"""

from __future__ import annotations

from typing import Any

from activities.providers.base import ModelRequest, ToolSpec
from activities.providers.thinking_params import anthropic_thinking
from activities.providers.tool_call_ids import anthropic_wire_id
from activities.providers.tool_images import anthropic_image_block, result_text, tool_images
from activities.providers.tool_schemas import normalize_tool_schema
from agentlane.transcript import Role, TranscriptEntry

THINKING_META_KEY = "anthropic_thinking"
_CACHE = {"type": "ephemeral"}
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def build_messages_body(
    request: ModelRequest, *, max_tokens: int, tools: bool = True
) -> dict[str, Any]:
    """Keyword arguments for `messages.create` (without `stream`); `tools=False` for a model
    that takes no tools."""
    system_parts = [request.system] if request.system.strip() else []
    system_parts += [e.text for e in request.entries if e.role == Role.SYSTEM and e.text.strip()]
    messages = to_messages(request.entries, images=request.images)
    thinking, thought_max = anthropic_thinking(request.thinking, max_tokens)
    if thinking is not None and _continues_unsigned_tool_use(messages):
        # With thinking on, the API takes a tool-use turn only if it starts with the model's
        # signed thinking; one made by another provider (a fallback mid-loop) or with thinking
        # off has none. This call finishes that turn without thinking, as the API advises;
        # the next turn has it again.
        thinking = None
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": thought_max if thinking is not None else max_tokens,
        "messages": messages,
    }
    if system_parts:
        block: dict[str, Any] = {"type": "text", "text": "\n\n".join(system_parts)}
        if request.options.get("prompt_cache", True):
            block["cache_control"] = dict(_CACHE)
        body["system"] = [block]
    if request.tools and tools:
        body["tools"] = [to_tool(tool) for tool in request.tools]
    if thinking is not None:
        body["thinking"] = thinking
    return body


def _continues_unsigned_tool_use(messages: list[dict[str, Any]]) -> bool:
    """Whether the request continues a tool-use turn (its last assistant message, answered by
    tool results) whose assistant message does not start with a thinking block."""
    for message in reversed(messages):
        blocks = message.get("content")
        if not isinstance(blocks, list):
            return False
        if message.get("role") == "user":
            if not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
                return False  # a new user turn: earlier turns' thinking is not required
            continue
        if not any(isinstance(b, dict) and b.get("type") == "tool_use" for b in blocks):
            return False
        first = blocks[0] if blocks else {}
        return not (isinstance(first, dict) and first.get("type") in _THINKING_BLOCKS)
    return False


def to_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": normalize_tool_schema(tool.parameters, "anthropic"),
    }


def to_messages(entries: list[TranscriptEntry], images: bool = False) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for entry in entries:
        role, blocks = _blocks(entry, images)
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    return messages


def _blocks(entry: TranscriptEntry, images: bool = False) -> tuple[str, list[dict[str, Any]]]:
    if entry.role == Role.USER:
        return "user", _text(entry.text)
    if entry.role == Role.TOOL:
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": anthropic_wire_id(entry.tool_call_id or ""),
        }
        text = result_text(entry, images)
        shown = tool_images(entry) if images else []
        if shown:
            # A tool result's content may hold image blocks beside its text.
            result["content"] = [*_text(text), *(anthropic_image_block(i) for i in shown)]
        elif text:
            result["content"] = text
        if entry.is_error:
            result["is_error"] = True
        return "user", [result]
    if entry.role == Role.ASSISTANT:
        blocks = list(_signed_thinking(entry)) if entry.tool_calls else []
        blocks += _text(entry.text)
        blocks += [
            {
                "type": "tool_use",
                "id": anthropic_wire_id(call.id),
                "name": call.name,
                # A call whose arguments were not a JSON object still needs an object here.
                "input": call.arguments if call.raw_arguments is None else {},
            }
            for call in entry.tool_calls
        ]
        return "assistant", blocks
    return "system", []  # system entries went into the system prompt


def _text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text.strip() else []


def _signed_thinking(entry: TranscriptEntry) -> list[dict[str, Any]]:
    stored = entry.meta.get(THINKING_META_KEY)
    if not isinstance(stored, list):
        return []
    return [
        dict(block)
        for block in stored
        if isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking")
    ]
