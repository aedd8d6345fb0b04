"""Search attribute values as plain dicts (name -> value, None: unset), and their conversion to
and from the SDK's typed form: what the client starts a session with, what the workflows read
back and upsert (workflows/search_attribute_upserts.py), what `agentlane sessions` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from agentlane import search_attributes as sa

Value = str | int | float
Values = dict[str, Value | None]

KEYS: dict[str, SearchAttributeKey[Any]] = {
    sa.SESSION_KEY.name: sa.SESSION_KEY_KEY,
    sa.AGENT.name: sa.AGENT_KEY,
    sa.MODEL.name: sa.MODEL_KEY,
    sa.AUTH_PROFILE.name: sa.AUTH_PROFILE_KEY,
    sa.CHANNEL.name: sa.CHANNEL_KEY,
    sa.PHASE.name: sa.PHASE_KEY,
    sa.SOURCE.name: sa.SOURCE_KEY,
    sa.LAST_ERROR.name: sa.LAST_ERROR_KEY,
    sa.TURNS.name: sa.TURNS_KEY,
    sa.TOKENS.name: sa.TOKENS_KEY,
    sa.COST.name: sa.COST_KEY,
}


def read(attrs: TypedSearchAttributes) -> Values:
    return {name: attrs.get(key) for name, key in KEYS.items()}


def typed(values: Mapping[str, Value | None]) -> TypedSearchAttributes:
    """Values as a start option (unset ones left out)."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(KEYS[name], value)
            for name, value in values.items()
            if value is not None
        ]
    )
