"""What a tool returns to the model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_RESULT_CHARS = 50_000


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    summary: str = ""
    # Images for the model (`read` of a PNG, JPEG, GIF or WebP): each {"media_type", "data"
    # (base64), "path", "bytes"}. They go to the transcript entry's `meta["images"]`, never into
    # workflow history; the provider's request builder turns them into image blocks.
    images: tuple[dict[str, Any], ...] = field(default=())


def clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit // 2]
    tail = text[-limit // 2 :]
    return f"{head}\n… [{len(text) - limit} characters omitted] …\n{tail}"


def error_summary(text: str, limit: int = 120) -> str:
    """A failed call's one-line reason for the tool line watchers see, from its result when
    the tool gave none: its first line, without the "Error: " every such result starts with."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return first.strip().removeprefix("Error: ")[:limit]
