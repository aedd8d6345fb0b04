"""What a tool returns to the model."""

from __future__ import annotations

from dataclasses import dataclass

MAX_RESULT_CHARS = 50_000


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    summary: str = ""


def clip(text: str, limit: int = MAX_RESULT_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = text[: limit // 2]
    tail = text[-limit // 2 :]
    return f"{head}\n… [{len(text) - limit} characters omitted] …\n{tail}"
