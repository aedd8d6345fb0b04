"""Thinking levels (SPEC §6) as each provider's request parameter.

Levels: off, minimal, low, medium, high, xhigh, adaptive.

* Anthropic: `thinking={"type": "enabled", "budget_tokens": N}` with the budgets below; `off`
  omits the parameter; `adaptive` is `{"type": "adaptive"}` (the model picks its own budget).
  The budget must stay below `max_tokens`; when the caller's limit cannot hold it, the budget is
  added on top so the answer keeps the room the caller asked for.
* OpenAI (Chat Completions `reasoning_effort`, Responses `reasoning.effort`, and compatible
  servers that honour it, such as Ollama): the level's own name; `off` is `"none"` on a reasoning
  model that can switch reasoning off and no parameter at all otherwise (a model that always
  reasons then uses its default); `adaptive` sends no parameter.

A level the model does not list is refused before any request is sent, with the error a provider
would give (status 400, `think value "high" is not supported ... Supported values are: "low",
"off".`) so the run loop's fallback picker (SPEC §6) can parse it. The supported values are listed
nearest-first (the closest lower level, then lower ones, then higher ones), because the picker
takes the first value it has not tried yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from activities.providers.base import ProviderError
from agentlane.thinking_levels import THINKING_LEVELS, normalize_thinking_level

__all__ = ["THINKING_LEVELS", "normalize_thinking_level"]
_ORDERED = ("off", "minimal", "low", "medium", "high", "xhigh")

ANTHROPIC_THINKING_BUDGETS = {
    "minimal": 1024,  # the API's minimum budget
    "low": 4096,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
}

UNSUPPORTED_THINKING_CODE = "unsupported_thinking_level"


def is_supported(level: str, supported: Sequence[str]) -> bool:
    # "off" is always accepted: at worst it means "send no thinking parameter".
    return level == "off" or level in supported


def check_thinking_supported(
    level: str, supported: Sequence[str], *, provider: str, model: str
) -> None:
    if level not in THINKING_LEVELS:
        raise ProviderError(
            f'think value "{level}" is not a thinking level. Supported values are: '
            + _quoted(_nearest_first("off", supported))
            + ".",
            provider=provider,
            model=model,
            status=400,
            code=UNSUPPORTED_THINKING_CODE,
        )
    if not is_supported(level, supported):
        raise unsupported_thinking_error(level, supported, provider=provider, model=model)


def unsupported_thinking_error(
    level: str, supported: Sequence[str], *, provider: str, model: str
) -> ProviderError:
    return ProviderError(
        f'think value "{level}" is not supported for {provider}/{model}. Supported values are: '
        + _quoted(_nearest_first(level, supported))
        + ".",
        provider=provider,
        model=model,
        status=400,
        code=UNSUPPORTED_THINKING_CODE,
    )


def anthropic_thinking(level: str, max_tokens: int) -> tuple[dict[str, Any] | None, int]:
    """The `thinking` parameter (None to omit it) and the `max_tokens` to send with it."""
    if level == "off":
        return None, max_tokens
    if level == "adaptive":
        return {"type": "adaptive"}, max_tokens
    budget = ANTHROPIC_THINKING_BUDGETS[level]
    if budget >= max_tokens:
        max_tokens = budget + max_tokens
    return {"type": "enabled", "budget_tokens": budget}, max_tokens


def openai_reasoning_effort(level: str, supported: Sequence[str]) -> str | None:
    """The `reasoning_effort` value, or None to send no reasoning parameter."""
    if level == "adaptive":
        return None
    if level == "off":
        # No parameter, not "none": o-series models and most compatible servers refuse "none"
        # (a model whose list holds "off" sent it on every plain request, and lowering a refused
        # level to off sent it again), and GPT-5.1, which takes it, defaults to it.
        return None
    return level


def _nearest_first(level: str, supported: Sequence[str]) -> list[str]:
    accepted = [lvl for lvl in _ORDERED if is_supported(lvl, supported)]
    if "adaptive" in supported:
        accepted.append("adaptive")
    if level not in _ORDERED:
        return accepted
    rank = _ORDERED.index(level)
    lower = [lvl for lvl in reversed(accepted) if lvl in _ORDERED and _ORDERED.index(lvl) < rank]
    higher = [lvl for lvl in accepted if lvl not in lower and lvl != level]
    return lower + higher


def _quoted(values: Sequence[str]) -> str:
    return ", ".join(f'"{v}"' for v in values)
