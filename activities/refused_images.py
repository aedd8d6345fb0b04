"""An image the provider refuses (a corrupt file, a size or a format it does not take) is left
out of the session's requests from then on.

A tool result's image is re-sent with every later request of the session: refused once, it was
refused every time, and every message failed until a reset. When a request that carries images
is refused with a 400 naming an image, each image of the request is marked refused in the store
(by its tool call), and the call is made again; requests then carry a note in its place, which
tells the model why it cannot see it.
"""

from __future__ import annotations

import re

from activities.context.token_estimate import IMAGES_META_KEY
from activities.providers.base import ModelRequest, ProviderError
from activities.providers.tool_images import tool_images
from agentlane.transcript import TranscriptEntry
from store.interface import Store

IMAGE_REFUSED = "image-refused"
# The words a provider uses when an image is what it refuses (Anthropic: "Could not process
# image", "image exceeds 5 MB maximum"; OpenAI: "Invalid image", "image_parse_error").
_IMAGE_WORDS = re.compile(r"\bimage|image_url|image_parse", re.IGNORECASE)


def refused_images(request: ModelRequest, err: ProviderError) -> list[TranscriptEntry]:
    """The request's image-bearing tool results when `err` is a refusal of an image; else []."""
    if err.transport or err.status != 400 or not request.images:
        return []
    if not _IMAGE_WORDS.search(err.message):
        return []
    return [e for e in request.entries if e.tool_call_id and tool_images(e)]


async def mark_refused(
    store: Store, session_key: str, entries: list[TranscriptEntry], why: str
) -> None:
    reason = " ".join(why.split())[:300]
    for entry in entries:
        assert entry.tool_call_id is not None
        await store.mark_tool_call(session_key, entry.tool_call_id, IMAGE_REFUSED, reason)


async def without_refused_images(
    store: Store, session_key: str, entries: list[TranscriptEntry]
) -> list[TranscriptEntry]:
    """`entries` with each image marked refused replaced by a note (a store read per tool result
    that carries images, none for a context without images)."""
    out: list[TranscriptEntry] = []
    for entry in entries:
        images = tool_images(entry) if entry.tool_call_id else []
        why = (
            await store.tool_mark(session_key, entry.tool_call_id, IMAGE_REFUSED)
            if images and entry.tool_call_id
            else None
        )
        if why is None:
            out.append(entry)
            continue
        names = ", ".join(i.path or "image" for i in images)
        meta = {k: v for k, v in entry.meta.items() if k != IMAGES_META_KEY}
        note = (
            f"\n[The image ({names}) is not shown: the model's provider refused it ({why}). "
            "Look at it another way, for example with exec and an image tool.]"
        )
        out.append(entry.model_copy(update={"text": entry.text + note, "meta": meta}))
    return out
