"""Token estimates for transcript entries (SPEC §11.2, §10.2, §4.6.4).

Two estimators, because the original uses two:

* The compaction estimate (pi's, §11.2): characters / 4, rounded up per entry, over a user's or
  assistant's text, the assistant's reasoning, each tool call's name and JSON arguments, and a
  tool result's text; an image counts ≈ 1 200 tokens. The cut point, the chunking and the
  preemptive check (§10.3) use it.
* The live-guard estimate (§10.2), in characters: 4 characters a token for ordinary text, a tool
  result's content counted double (2 characters a token) and an image as 8 000 characters. Only
  the live guard uses it (`tool_result_truncation.apply_live_guard`).

Both over-estimate on purpose: an estimate that is too low lets a request overflow, one that is
too high only compacts a little early.

Calibration: a provider's reported usage is the truth for the context it was sent. The last
assistant entry with usage covers every entry before it (its prompt tokens) and itself (its
output tokens); only the entries after it are estimated (`calibrated_context_tokens`). The
reported figure also holds the system prompt and tool schemas, which the plain estimate does not.

The transcript has no image blocks yet: an entry that carries images lists them under
`meta["images"]` (one item per image), which is what these estimates count.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from agentlane.transcript import Role, ToolCall, TranscriptEntry

CHARS_PER_TOKEN: Final = 4
# §11.2: pi counts an image as 4 800 characters, ≈ 1 200 tokens.
IMAGE_TOKENS: Final = 1_200
# §10.2: the live guard counts an image as 8 000 characters.
GUARD_IMAGE_CHARS: Final = 8_000
# §10.2: tool-result content is estimated at 2 characters a token, i.e. counted double.
GUARD_TOOL_RESULT_WEIGHT: Final = 2
IMAGES_META_KEY: Final = "images"
# Assistant turns that ended this way carry no trustworthy usage (the call did not complete).
_NO_USAGE_STOP_REASONS: Final = frozenset({"error", "aborted", "idle_timeout"})


def image_count(entry: TranscriptEntry) -> int:
    images = entry.meta.get(IMAGES_META_KEY)
    return len(images) if isinstance(images, list) else 0


def tool_call_chars(call: ToolCall) -> int:
    """A call as the model wrote it: its name and its arguments as compact JSON (or the raw
    text when the arguments were not a JSON object)."""
    if call.raw_arguments is not None:
        return len(call.name) + len(call.raw_arguments)
    arguments = json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)
    return len(call.name) + len(arguments)


def entry_chars(entry: TranscriptEntry) -> int:
    """The characters of an entry the model reads (images not included)."""
    if entry.role == Role.ASSISTANT:
        return (
            len(entry.text)
            + len(entry.reasoning)
            + sum(tool_call_chars(call) for call in entry.tool_calls)
        )
    return len(entry.text)


def estimate_text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_entry_tokens(entry: TranscriptEntry) -> int:
    """The compaction estimate of one entry (§11.2)."""
    return math.ceil(entry_chars(entry) / CHARS_PER_TOKEN) + image_count(entry) * IMAGE_TOKENS


def estimate_tokens(entries: Sequence[TranscriptEntry]) -> int:
    return sum(estimate_entry_tokens(entry) for entry in entries)


def guard_entry_chars(entry: TranscriptEntry) -> int:
    """The live-guard estimate of one entry, in characters (§10.2)."""
    chars = entry_chars(entry) + image_count(entry) * GUARD_IMAGE_CHARS
    if entry.role == Role.TOOL:
        return chars * GUARD_TOOL_RESULT_WEIGHT
    return chars


def guard_context_chars(entries: Sequence[TranscriptEntry]) -> int:
    return sum(guard_entry_chars(entry) for entry in entries)


@dataclass(frozen=True)
class ContextTokens:
    """How full the context is, and how much of that figure the provider reported.

    `anchor_index` is the assistant entry whose usage was used (None: nothing reported, the
    whole figure is an estimate). When `reported` is non-zero, `tokens` already includes the
    system prompt and tool schemas as of that call.
    """

    tokens: int
    reported: int
    estimated: int
    anchor_index: int | None


def reported_context_tokens(entry: TranscriptEntry) -> int | None:
    """The context an assistant entry's call filled (prompt side plus its own output), or None
    when the entry has no usable usage."""
    if entry.role != Role.ASSISTANT or entry.usage is None:
        return None
    if entry.stop_reason in _NO_USAGE_STOP_REASONS:
        return None
    total = entry.usage.prompt_tokens + entry.usage.output
    return total if total > 0 else None


def calibrated_context_tokens(
    entries: Sequence[TranscriptEntry], *, usage_valid_from: int = 0
) -> ContextTokens:
    """The context's size: the last reported usage plus an estimate of what came after it.

    Only assistant entries at index `usage_valid_from` or later may anchor: after a compaction
    or a truncation rewrote entries, an older call's usage describes a context that no longer
    exists, so the caller passes the index of the first entry after the rewrite.
    """
    for index in range(len(entries) - 1, max(usage_valid_from, 0) - 1, -1):
        reported = reported_context_tokens(entries[index])
        if reported is not None:
            estimated = estimate_tokens(entries[index + 1 :])
            return ContextTokens(reported + estimated, reported, estimated, index)
    estimated = estimate_tokens(entries)
    return ContextTokens(estimated, 0, estimated, None)


def request_overhead_tokens(system_prompt: str, tools: Sequence[object]) -> int:
    """The system prompt and tool schemas a request carries beside its entries (estimated: a
    provider's reported usage already holds them)."""
    schemas = json.dumps([getattr(t, "__dict__", str(t)) for t in tools], default=str)
    return estimate_text_tokens(system_prompt) + estimate_text_tokens(schemas)
