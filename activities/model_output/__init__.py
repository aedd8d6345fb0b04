"""Model-output processing: think/final tags, reasoning modes, block chunking, normalisation.

Pure functions and small state machines over text; no I/O, stdlib only, so activities can run
them inline and tests can drive them directly.
"""

from activities.model_output.block_chunker import (
    BlockChunker,
    BlockChunkingConfig,
    BlockCoalescer,
    BlockReplyDeduper,
    BreakPreference,
    coalescer_joiner,
    resolve_block_chunking,
)
from activities.model_output.normalization import (
    HEARTBEAT_TOKEN,
    SILENT_REPLY_TOKEN,
    NormalizationOptions,
    normalize_streaming_text,
    normalize_text,
    strip_heartbeat_token,
    strip_silent_token,
    undelivered_text,
)
from activities.model_output.think_tags import (
    PromotedText,
    ReasoningDelivery,
    ReasoningMode,
    StrippedDelta,
    ThinkTagStreamStripper,
    format_reasoning_message,
    plan_reasoning_delivery,
    promote_thinking_tags_to_blocks,
    split_reasoning_from_text,
    strip_reasoning_tags_from_text,
)

__all__ = [
    "HEARTBEAT_TOKEN",
    "SILENT_REPLY_TOKEN",
    "BlockChunker",
    "BlockChunkingConfig",
    "BlockCoalescer",
    "BlockReplyDeduper",
    "BreakPreference",
    "NormalizationOptions",
    "PromotedText",
    "ReasoningDelivery",
    "ReasoningMode",
    "StrippedDelta",
    "ThinkTagStreamStripper",
    "coalescer_joiner",
    "format_reasoning_message",
    "normalize_streaming_text",
    "normalize_text",
    "plan_reasoning_delivery",
    "promote_thinking_tags_to_blocks",
    "resolve_block_chunking",
    "split_reasoning_from_text",
    "strip_heartbeat_token",
    "strip_reasoning_tags_from_text",
    "strip_silent_token",
    "undelivered_text",
]
