"""The provider's own window wins (SPEC §5.6; issue 24): when a provider's overflow error names
the window it enforces and that is smaller than the configured one, the run compacts to fit it
and the session remembers it for that model.

Pure functions over plain figures; the run workflow calls them and keeps the result in its carry
(`RunCarry.provider_windows`), the session in `SessionState.provider_windows`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class LearnedWindow:
    model: str
    window: int
    configured: int

    def warning(self) -> str:
        return (
            f"{self.model} enforces a context window of {self.window} tokens, not the "
            f"{self.configured} configured: the context is compacted to fit it, and this "
            "session remembers it"
        )


def known_window(model: str, *memories: Mapping[str, int]) -> int | None:
    """The smallest window any memory holds for `model` (None: none known)."""
    found = [memory[model] for memory in memories if memory.get(model)]
    return min(found) if found else None


def learn_window(
    model: str,
    observed_limit: int | None,
    configured: int | None,
    known: int | None,
) -> LearnedWindow | None:
    """A window to remember: the one the provider named, when it is smaller than both the
    configured window and any window already known for the model. None otherwise (no figure,
    no configured window to compare with, or nothing new)."""
    if observed_limit is None or observed_limit <= 0 or configured is None:
        return None
    if observed_limit >= configured or (known is not None and observed_limit >= known):
        return None
    return LearnedWindow(model=model, window=observed_limit, configured=configured)


def merged_windows(known: Mapping[str, int], learned: Mapping[str, int]) -> dict[str, int]:
    """The session's memory after a run: each model's smallest window."""
    merged = dict(known)
    for model, window in learned.items():
        if window > 0:
            merged[model] = min(window, merged.get(model, window))
    return merged


def provider_figures_text(provider: str, prompt: int | None, window: int | None) -> str:
    """The provider's own figures for an overflow message ("" when it gave none)."""
    if prompt and window:
        return f"{provider} counted {prompt} tokens against its context window of {window}"
    if window:
        return f"{provider} enforces a context window of {window} tokens"
    if prompt:
        return f"{provider} counted {prompt} tokens"
    return ""
