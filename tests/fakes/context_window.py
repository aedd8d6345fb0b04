"""The fake provider's context window: how big a request's prompt is, and when it is too big.

With a window set (`POST /_control/context`), every model request's prompt is counted from its
JSON body and one over the window gets the provider's real overflow error, before any scripted
reply is taken. The count is what the fake reports as usage input tokens for a request that
fits, so the engine's calibration sees the same number the overflow would have named.

What counts, for all three wire formats alike: the text of the system prompt (`system`,
`instructions`), of every message or input item (text, thinking, tool call names and
arguments, tool results), and each tool's schema as compact JSON; characters divided by
`chars_per_token`, rounded up. Ids, roles, types, signatures and cache markers are wire
structure, not prompt. An image counts as `IMAGE_CHARS` characters whatever its encoding, as
providers bill images by size, not by their base64 length.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from pydantic import BaseModel, Field

from tests.fakes.scripts import Fault

IMAGE_CHARS: Final = 6_400  # ~1 600 tokens at 4 characters a token: a mid-sized image
_STRUCTURE: Final = frozenset(
    {
        "type",
        "role",
        "id",
        "tool_use_id",
        "tool_call_id",
        "call_id",
        "cache_control",
        "signature",
        "status",
        "encrypted_content",
    }
)
_IMAGE_TYPES: Final = frozenset({"image", "image_url", "input_image"})
_PROMPT_FIELDS: Final = ("system", "instructions", "messages", "input")


class ContextWindow(BaseModel):
    """`window` None: no limit (usage keeps the rough whole-body estimate)."""

    window: int | None = Field(default=None, gt=0)
    chars_per_token: float = Field(default=4.0, gt=0)


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_chars(item) for item in value)
    if not isinstance(value, dict):
        return 0  # numbers, booleans, null: structure
    if value.get("type") in _IMAGE_TYPES:
        return IMAGE_CHARS
    total = 0
    for key, item in value.items():
        if key in _STRUCTURE:
            continue
        if key == "input" and isinstance(item, dict):
            # Anthropic's tool_use arguments are an object; OpenAI sends the same as a JSON
            # string. Counting the compact JSON makes both weigh the same.
            total += len(json.dumps(item, separators=(",", ":")))
        else:
            total += _chars(item)
    return total


def prompt_chars(body: dict[str, Any]) -> int:
    total = sum(_chars(body.get(name)) for name in _PROMPT_FIELDS)
    tools = body.get("tools") or []
    return total + sum(len(json.dumps(tool, separators=(",", ":"))) for tool in tools)


def prompt_tokens(body: dict[str, Any], chars_per_token: float = 4.0) -> int:
    return math.ceil(prompt_chars(body) / chars_per_token)


def overflow_fault(fault: Fault | None, counted: int, window: int | None) -> Fault:
    """The overflow error to send: the figures a scripted fault names, else the counted prompt
    and the window (a forced overflow under the window still reads as one, see
    `Fault.figures`)."""
    base = fault if fault is not None else Fault.named("context_overflow")
    limit = base.limit_tokens or window
    prompt = base.prompt_tokens
    if prompt is None and limit is not None and counted > limit:
        prompt = counted
    return base.model_copy(update={"limit_tokens": limit, "prompt_tokens": prompt})
