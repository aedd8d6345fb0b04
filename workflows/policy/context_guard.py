"""Context window guard (SPEC §9, case T22 of §18.3): checked once per run, before any provider
call. Pure: the caller passes the resolved window and logs the warning once."""

from __future__ import annotations

from dataclasses import dataclass

from agentlane.config import CONTEXT_WINDOW_BLOCK_BELOW, CONTEXT_WINDOW_WARN_BELOW
from agentlane.errors import FailoverReason
from workflows.policy.preemptive_check import CHARS_PER_TOKEN

__all__ = [
    "CONTEXT_WINDOW_BLOCK_BELOW",
    "CONTEXT_WINDOW_WARN_BELOW",
    "ContextGuardResult",
    "evaluate_context_window",
    "message_too_large",
]


@dataclass(frozen=True)
class ContextGuardResult:
    """`block_message` ends the run with a FailoverError of `block_reason` (unknown) before any
    provider call; `warning` is logged once. Both None: the window is fine."""

    tokens: int
    source: str
    warning: str | None = None
    block_message: str | None = None
    block_reason: FailoverReason | None = None

    @property
    def blocked(self) -> bool:
        return self.block_message is not None


def evaluate_context_window(
    tokens: int | float, *, provider: str, model: str, source: str = "model"
) -> ContextGuardResult:
    """Warn below 32 000 tokens, block below 16 000 (SPEC §9), with the original's texts.

    `source` names where the window came from (model, modelsConfig, agentContextTokens,
    default). A non-positive window is treated as unknown: neither warned nor blocked.
    """
    count = max(0, int(tokens))
    ref = f"{provider}/{model}"
    warning = None
    if 0 < count < CONTEXT_WINDOW_WARN_BELOW:
        warning = (
            f"low context window: {ref} ctx={count} (warn<{CONTEXT_WINDOW_WARN_BELOW}) "
            f"source={source}"
        )
    if not 0 < count < CONTEXT_WINDOW_BLOCK_BELOW:
        return ContextGuardResult(count, source, warning)
    return ContextGuardResult(
        count,
        source,
        warning,
        block_message=(
            f"Model context window too small ({count} tokens). "
            f"Minimum is {CONTEXT_WINDOW_BLOCK_BELOW}."
        ),
        block_reason=FailoverReason.UNKNOWN,
    )


def message_too_large(text: str, window: int, model: str) -> str | None:
    """Why a message cannot be taken, when its text alone is larger than the model's whole
    window: accepted, it would stay in every later request of the session and fail each one
    until a reset. None: it may fit (the run's own checks decide the rest)."""
    if window <= 0:
        return None
    tokens = -(-len(text) // CHARS_PER_TOKEN)
    if tokens <= window:
        return None
    return (
        f"the message is about {tokens} tokens, more than {model}'s whole context window "
        f"({window} tokens): no request could carry it. Shorten it, or put the text in a file "
        "in the workspace and ask the agent to read it"
    )
