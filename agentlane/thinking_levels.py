"""Thinking levels, the words that name them (SPEC §6) and the reasoning-constraint check (§5.5).

Pure data and string functions only: the run workflow imports this through the sandbox, and the
provider error classifier imports it too, so the phrases live in exactly one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

THINKING_LEVELS: Final = ("off", "minimal", "low", "medium", "high", "xhigh", "adaptive")

# Words users (and provider error messages) use for a level. Keys are written without spaces,
# hyphens or underscores because those are removed before lookup ("think harder", "x-high").
THINKING_LEVEL_ALIASES: Final[Mapping[str, str]] = {
    "on": "low",
    "enable": "low",
    "enabled": "low",
    "min": "minimal",
    "think": "minimal",
    "mid": "medium",
    "med": "medium",
    "thinkharder": "medium",
    "harder": "medium",
    "ultra": "high",
    "ultrathink": "high",
    "highest": "high",
    "max": "high",
    "auto": "adaptive",
    "extrahigh": "xhigh",
}

# A model that refuses to run with reasoning switched off says so in one of these ways (§5.5).
REASONING_CONSTRAINT_PHRASES: Final = (
    "reasoning is mandatory",
    "reasoning is required",
    "requires reasoning",
)
# ... or mentions reasoning together with this phrase anywhere in the message.
REASONING_CANNOT_BE_DISABLED: Final = "cannot be disabled"

_WORD_SEPARATORS = re.compile(r"[\s_-]+")


def normalize_thinking_level(word: str | None) -> str | None:
    """The canonical level a user word names, or None when it names no level."""
    if not word:
        return None
    key = _WORD_SEPARATORS.sub("", word.strip().lower())
    if key in THINKING_LEVELS:
        return key
    return THINKING_LEVEL_ALIASES.get(key)


def is_reasoning_constraint_message(text: str) -> bool:
    """True when the provider says reasoning cannot be turned off for this model."""
    lowered = text.lower()
    if any(phrase in lowered for phrase in REASONING_CONSTRAINT_PHRASES):
        return True
    return "reasoning" in lowered and REASONING_CANNOT_BE_DISABLED in lowered
