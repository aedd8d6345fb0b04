"""Images a tool result carries (`meta["images"]`, written by `read`), for the request builders.

The images live in the transcript store, never in workflow history; the request builder reads
them into the request: as image blocks for a model the catalogue says sees images
(`capabilities.images`), as a clear note for one that does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from activities.context.token_estimate import IMAGES_META_KEY
from agentlane.transcript import Role, TranscriptEntry

MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True)
class ToolImage:
    media_type: str
    data: str  # base64
    path: str

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


def tool_images(entry: TranscriptEntry) -> list[ToolImage]:
    if entry.role != Role.TOOL:
        return []
    raw = entry.meta.get(IMAGES_META_KEY)
    if not isinstance(raw, list):
        return []
    found: list[ToolImage] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        media, data = item.get("media_type"), item.get("data")
        if media in MEDIA_TYPES and isinstance(data, str) and data:
            found.append(ToolImage(str(media), data, str(item.get("path", ""))))
    return found


def not_shown_note(images: list[ToolImage]) -> str:
    names = ", ".join(i.path or "image" for i in images)
    return (
        f"\n[The image ({names}) is not shown: this model does not take images. Describe what "
        "you need from it another way, for example with exec and an image tool.]"
    )


def result_text(entry: TranscriptEntry, see_images: bool) -> str:
    """A tool result's text, with the note a model that cannot see its images needs."""
    images = tool_images(entry)
    if images and not see_images:
        return entry.text + not_shown_note(images)
    return entry.text


def follow_up_text(entry: TranscriptEntry, images: list[ToolImage]) -> str:
    """For APIs where a tool result holds text only: the user message that carries the images."""
    names = ", ".join(i.path or "image" for i in images)
    return f"The image read by tool call {entry.tool_call_id} ({names}):"


def anthropic_image_block(image: ToolImage) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
    }
