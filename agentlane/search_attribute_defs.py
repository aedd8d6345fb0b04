"""The search attribute definitions (names, types, filter options, help) without the Temporal
SDK: `agentlane sessions` builds its options from them, and the CLI parser is built for every
command, so it must not pay for importing `temporalio` (issue 22). `agentlane.search_attributes`
re-exports them with the SDK keys."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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
