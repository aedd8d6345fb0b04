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

from dataclasses import dataclass
from enum import StrEnum

from temporalio.common import SearchAttributeKey


class AttributeType(StrEnum):
    KEYWORD = "Keyword"
    INT = "Int"
    DOUBLE = "Double"


@dataclass(frozen=True)
class AttributeDef:
    name: str
    type: AttributeType
    # What `agentlane sessions --<option>` filters with it (None: not a filter option).
    option: str | None
    help: str


SESSION_KEY = AttributeDef(
    "AgentSessionKey", AttributeType.KEYWORD, "session", "the session key (sessions and runs)"
)
AGENT = AttributeDef("AgentId", AttributeType.KEYWORD, "agent", "the agent id")
MODEL = AttributeDef(
    "AgentModel", AttributeType.KEYWORD, "model", "provider/model answering (the fallback's)"
)
AUTH_PROFILE = AttributeDef(
    "AgentAuthProfile", AttributeType.KEYWORD, "profile", "the auth profile id in use (never a key)"
)
CHANNEL = AttributeDef(
    "AgentChannel", AttributeType.KEYWORD, "channel", "the chat channel of the latest message"
)
PHASE = AttributeDef(
    "AgentPhase",
    AttributeType.KEYWORD,
    "phase",
    "idle / running / waiting / compacting (a run: running / waiting / compacting / ended)",
)
SOURCE = AttributeDef(
    "AgentSource", AttributeType.KEYWORD, "source", "what started the run: chat, cli, cron, ..."
)
LAST_ERROR = AttributeDef(
    "AgentLastError",
    AttributeType.KEYWORD,
    "error",
    "the error kind of the latest run that failed (rate_limit, context_overflow, ...)",
)
TURNS = AttributeDef("AgentTurns", AttributeType.INT, None, "model turns so far")
TOKENS = AttributeDef("AgentTokens", AttributeType.INT, None, "tokens so far (all kinds)")
COST = AttributeDef(
    "AgentCostUsd", AttributeType.DOUBLE, None, "US dollars so far; unset when unpriced"
)

ALL: tuple[AttributeDef, ...] = (
    SESSION_KEY,
    AGENT,
    MODEL,
    AUTH_PROFILE,
    CHANNEL,
    PHASE,
    SOURCE,
    LAST_ERROR,
    TURNS,
    TOKENS,
    COST,
)

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
