"""Pick a lower thinking level after a provider rejected the current one (SPEC §6).

Runs inside the workflow sandbox: stdlib `re` and the pure `agentlane.thinking_levels` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentlane.thinking_levels import is_reasoning_constraint_message, normalize_thinking_level

__all__ = ["normalize_thinking_level", "pick_fallback_thinking_level", "supported_thinking_values"]

# "Supported values are: ..." runs up to the end of the sentence or line.
_SUPPORTED_VALUES = re.compile(r"supported values(?:\s+are)?\s*:\s*([^\n.]*)")
_QUOTED_VALUE = re.compile(r"[\"'`]([^\"'`]+)[\"'`]")
_LIST_SEPARATOR = re.compile(r",|\band\b")
# From the first letter to the last: trims quotes, brackets and punctuation around a value.
_LETTER_SPAN = re.compile(r"[a-z](?:.*[a-z])?", re.DOTALL)


def supported_thinking_values(message: str) -> list[str]:
    """Canonical levels a provider lists as supported, in its order; unknown words are dropped."""
    found = _SUPPORTED_VALUES.search(message.lower())
    if found is None:
        return []
    listed = found.group(1)
    quoted = _QUOTED_VALUE.findall(listed)
    words = quoted if quoted else [_letters_only(part) for part in _split(listed)]
    levels = (normalize_thinking_level(word) for word in words)
    return [level for level in levels if level is not None]


def pick_fallback_thinking_level(message: str, attempted: Iterable[str]) -> str | None:
    """The next thinking level to try after `message`, or None when there is nothing to try.

    `attempted` holds the levels already used in this run (the run loop adds the current level
    before each attempt).
    """
    if not message.strip():
        return None
    tried = _normalized(attempted)
    if is_reasoning_constraint_message(message) and "minimal" not in tried:
        return "minimal"
    supported = supported_thinking_values(message)
    if not supported:
        return _off_if_level_unsupported(message, tried)
    return next((level for level in supported if level not in tried), None)


def _off_if_level_unsupported(message: str, tried: set[str]) -> str | None:
    # Without a list of alternatives, switching thinking off is the only safe guess.
    if "not supported" in message.lower() and "off" not in tried:
        return "off"
    return None


def _split(listed: str) -> list[str]:
    return [part for part in _LIST_SEPARATOR.split(listed) if part.strip()]


def _letters_only(part: str) -> str:
    found = _LETTER_SPAN.search(part)
    return found.group(0) if found else ""


def _normalized(levels: Iterable[str]) -> set[str]:
    # Callers may pass user words ("on", "max"); compare canonical levels.
    return {normalize_thinking_level(level) or level for level in levels}
