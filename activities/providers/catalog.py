"""From a model entry of the registry to the provider object that serves it."""

from __future__ import annotations

import importlib
from typing import cast

from activities.providers.anthropic_provider import AnthropicProvider
from activities.providers.base import ModelProvider
from activities.providers.openai_provider import OpenAIChatProvider, OpenAIResponsesProvider
from agentlane.config import ApiKind, ModelEntry

DEFAULT_TIMEOUT_SECONDS = 600.0


def build_provider(
    entry: ModelEntry, *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
) -> ModelProvider:
    """`timeout_seconds` bounds each HTTP read; the activity's idle timeout is separate."""
    if entry.api == ApiKind.ANTHROPIC:
        return AnthropicProvider(entry, timeout_seconds=timeout_seconds)
    if entry.api in (ApiKind.OPENAI_CHAT, ApiKind.OPENAI_COMPATIBLE):
        return OpenAIChatProvider(entry, timeout_seconds=timeout_seconds)
    if entry.api == ApiKind.OPENAI_RESPONSES:
        return OpenAIResponsesProvider(entry, timeout_seconds=timeout_seconds)
    if entry.api == ApiKind.OFFLINE:
        # Imported lazily: the offline model lives in its own module with its own dependencies.
        module = importlib.import_module("activities.providers.offline")
        return cast(ModelProvider, module.OfflineProvider())
    raise ValueError(f"no provider for api {entry.api!r} (model {entry.ref})")
