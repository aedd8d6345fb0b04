"""The custom search attributes that make sessions and runs findable in the Temporal UI and by
`agentlane sessions` (issue 12). One list, used by the dev server script, by
`agentlane setup-namespace` for a cluster, by the workflows that set them and by the filters.

Search attributes are stored unencrypted and are not processed by the payload codec
(TEMPORAL.md §6): nothing here may hold a key, a prompt or a file's content. Each upsert is a
history event, so the workflows upsert them only when a value changes (see
`workflows/policy/search_attributes.py`).

SQL visibility (the dev server, and SQLite/MySQL/PostgreSQL clusters) has a fixed number of
columns per type: 10 Keyword, 3 Int, 3 Double. This set uses 8, 2 and 1.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

# The definitions live in a module without the SDK (the CLI parser uses them); re-exported here.
from agentlane.search_attribute_defs import (
    AGENT,
    ALL,
    AUTH_PROFILE,
    CHANNEL,
    COST,
    LAST_ERROR,
    MODEL,
    PHASE,
    SESSION_KEY,
    SOURCE,
    TOKENS,
    TURNS,
    AttributeDef,
    AttributeType,
)

__all__ = [
    "AttributeType",
    "AttributeDef",
    "SESSION_KEY",
    "AGENT",
    "MODEL",
    "AUTH_PROFILE",
    "CHANNEL",
    "PHASE",
    "SOURCE",
    "LAST_ERROR",
    "TURNS",
    "TOKENS",
    "COST",
    "ALL",
]

SESSION_KEY_KEY = SearchAttributeKey.for_keyword(SESSION_KEY.name)
AGENT_KEY = SearchAttributeKey.for_keyword(AGENT.name)
MODEL_KEY = SearchAttributeKey.for_keyword(MODEL.name)
AUTH_PROFILE_KEY = SearchAttributeKey.for_keyword(AUTH_PROFILE.name)
CHANNEL_KEY = SearchAttributeKey.for_keyword(CHANNEL.name)
PHASE_KEY = SearchAttributeKey.for_keyword(PHASE.name)
SOURCE_KEY = SearchAttributeKey.for_keyword(SOURCE.name)
LAST_ERROR_KEY = SearchAttributeKey.for_keyword(LAST_ERROR.name)
TURNS_KEY = SearchAttributeKey.for_int(TURNS.name)
TOKENS_KEY = SearchAttributeKey.for_int(TOKENS.name)
COST_KEY = SearchAttributeKey.for_float(COST.name)


def dev_server_flags() -> list[str]:
    """`temporal server start-dev` registers these at start (idempotent across restarts)."""
    flags: list[str] = []
    for attr in ALL:
        flags += ["--search-attribute", f"{attr.name}={attr.type.value}"]
    return flags


def operator_commands(namespace: str, address: str) -> list[list[str]]:
    """What `agentlane setup-namespace` runs against a cluster, one command per attribute."""
    return [
        [
            "temporal",
            "operator",
            "search-attribute",
            "create",
            "--address",
            address,
            "--namespace",
            namespace,
            "--name",
            attr.name,
            "--type",
            attr.type.value,
        ]
        for attr in ALL
    ]
