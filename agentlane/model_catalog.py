"""Built-in model catalogue: a few well-known models so a key alone is enough to start.

Prices are list prices in US dollars per million tokens at the time of writing; context windows
and output limits are the providers' published figures. A config file can override any field.
OpenAI bills cache writes as ordinary input, so their `cache_write` equals `input`.
"""

from __future__ import annotations

from agentlane.config import ApiKind, ModelCapabilities, ModelEntry, ModelPrices

_CLAUDE_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"]
_CLAUDE_LEVELS_32K = ["off", "minimal", "low", "medium", "high"]
# o-series cannot switch reasoning off; gpt-5 can go down to minimal.
_O_SERIES_LEVELS = ["low", "medium", "high"]
_GPT5_LEVELS = ["minimal", "low", "medium", "high"]


def _claude(
    model_id: str,
    *,
    max_output: int,
    prices: tuple[float, float, float, float],
    levels: list[str],
) -> ModelEntry:
    return ModelEntry(
        provider="anthropic",
        id=model_id,
        api=ApiKind.ANTHROPIC,
        context_window=200_000,
        max_output_tokens=max_output,
        capabilities=ModelCapabilities(tools=True, images=True, thinking_levels=levels),
        prices=ModelPrices(
            input=prices[0], output=prices[1], cache_read=prices[2], cache_write=prices[3]
        ),
    )


def _openai(
    model_id: str,
    *,
    api: ApiKind,
    context: int,
    max_output: int,
    prices: tuple[float, float, float],
    levels: list[str],
) -> ModelEntry:
    return ModelEntry(
        provider="openai",
        id=model_id,
        api=api,
        context_window=context,
        max_output_tokens=max_output,
        capabilities=ModelCapabilities(
            tools=True, images=True, thinking_levels=levels, strict_tools=True
        ),
        prices=ModelPrices(
            input=prices[0], output=prices[1], cache_read=prices[2], cache_write=prices[0]
        ),
    )


# Who writes a model's compaction summaries: a lighter model of the same provider (same keys),
# cheaper and faster for a task that needs no frontier model.
_SUMMARISERS = {
    "anthropic/claude-sonnet-4-5": "anthropic/claude-haiku-4-5",
    "anthropic/claude-opus-4-5": "anthropic/claude-haiku-4-5",
    "anthropic/claude-opus-4-1": "anthropic/claude-haiku-4-5",
    "openai/gpt-4.1": "openai/gpt-4.1-mini",
    "openai/gpt-4o": "openai/gpt-4o-mini",
}


def builtin_models() -> list[ModelEntry]:
    return [
        entry.model_copy(update={"summariser": _SUMMARISERS[entry.ref]})
        if entry.ref in _SUMMARISERS
        else entry
        for entry in _models()
    ]


def _models() -> list[ModelEntry]:
    chat, responses = ApiKind.OPENAI_CHAT, ApiKind.OPENAI_RESPONSES
    return [
        ModelEntry(
            provider="offline",
            id="planner",
            api=ApiKind.OFFLINE,
            context_window=200_000,
            max_output_tokens=8_192,
            capabilities=ModelCapabilities(
                tools=True,
                thinking_levels=["off", "minimal", "low", "medium", "high", "xhigh", "adaptive"],
            ),
            key_required=False,
        ),
        _claude(
            "claude-sonnet-4-5",
            max_output=64_000,
            prices=(3.0, 15.0, 0.30, 3.75),
            levels=_CLAUDE_LEVELS,
        ),
        _claude(
            "claude-opus-4-5",
            max_output=64_000,
            prices=(5.0, 25.0, 0.50, 6.25),
            levels=_CLAUDE_LEVELS,
        ),
        _claude(
            "claude-opus-4-1",
            max_output=32_000,
            prices=(15.0, 75.0, 1.50, 18.75),
            levels=_CLAUDE_LEVELS_32K,
        ),
        _claude(
            "claude-haiku-4-5",
            max_output=64_000,
            prices=(1.0, 5.0, 0.10, 1.25),
            levels=_CLAUDE_LEVELS,
        ),
        _openai(
            "gpt-4.1",
            api=chat,
            context=1_047_576,
            max_output=32_768,
            prices=(2.0, 8.0, 0.50),
            levels=["off"],
        ),
        _openai(
            "gpt-4.1-mini",
            api=chat,
            context=1_047_576,
            max_output=32_768,
            prices=(0.40, 1.60, 0.10),
            levels=["off"],
        ),
        _openai(
            "gpt-4o",
            api=chat,
            context=128_000,
            max_output=16_384,
            prices=(2.50, 10.0, 1.25),
            levels=["off"],
        ),
        _openai(
            "gpt-4o-mini",
            api=chat,
            context=128_000,
            max_output=16_384,
            prices=(0.15, 0.60, 0.075),
            levels=["off"],
        ),
        _openai(
            "o3",
            api=responses,
            context=200_000,
            max_output=100_000,
            prices=(2.0, 8.0, 0.50),
            levels=_O_SERIES_LEVELS,
        ),
        _openai(
            "o4-mini",
            api=responses,
            context=200_000,
            max_output=100_000,
            prices=(1.10, 4.40, 0.275),
            levels=_O_SERIES_LEVELS,
        ),
        _openai(
            "gpt-5",
            api=responses,
            context=400_000,
            max_output=128_000,
            prices=(1.25, 10.0, 0.125),
            levels=_GPT5_LEVELS,
        ),
        _openai(
            "gpt-5-mini",
            api=responses,
            context=400_000,
            max_output=128_000,
            prices=(0.25, 2.0, 0.025),
            levels=_GPT5_LEVELS,
        ),
        _openai(
            "gpt-5-nano",
            api=responses,
            context=400_000,
            max_output=128_000,
            prices=(0.05, 0.40, 0.005),
            levels=_GPT5_LEVELS,
        ),
    ]
