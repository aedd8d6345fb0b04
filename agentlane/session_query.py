"""The visibility queries behind `agentlane sessions --phase ... --model ...` and the Python
client's `list_sessions` (issue 12): the same text a user types into the Temporal UI's search box.

A session carries its phase as idle or running. That its running run waits for a cooling profile
or compacts, only the run knows (it upserts `waiting` / `compacting`; the session would need a
history event on each change to mirror it). So `--phase waiting|compacting`, `--profile` and
`--source` ask the runs first (`runs_query`), and the sessions are those the matching runs belong
to (`sessions_query` with their keys).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from agentlane import search_attribute_defs as sa

SESSION_PHASES = ("idle", "running")
RUN_PHASES = ("waiting", "compacting")
# The runs whose phase a session's own does not show (it says `running`).
RUNS_WAITING_OR_COMPACTING = (
    "WorkflowType = 'AgentRunWorkflow' AND ExecutionStatus = 'Running' AND "
    "AgentPhase IN ('waiting', 'compacting')"
)
PHASES = (*SESSION_PHASES, *RUN_PHASES)


class BadFilter(ValueError):
    """A filter value that cannot be asked (an unknown phase, a control character)."""


def quote(value: str) -> str:
    """A string literal of the visibility query language: single quotes, with backslash and
    quote escaped (a value is data, never more query)."""
    if not value or any(ord(ch) < 0x20 for ch in value):
        raise BadFilter(f"not a filter value: {value!r}")
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _eq(name: str, value: str) -> str:
    return f"{name} = {quote(value)}"


@dataclass(frozen=True)
class SessionFilter:
    phase: str | None = None
    model: str | None = None
    error: str | None = None
    agent: str | None = None
    channel: str | None = None
    profile: str | None = None
    source: str | None = None
    # Closed sessions (and, for the run filters, runs that ended) too.
    include_closed: bool = False

    def __post_init__(self) -> None:
        if self.phase is not None and self.phase not in PHASES:
            raise BadFilter(f"unknown phase {self.phase!r}: choose one of {', '.join(PHASES)}")
        if self.phase is not None and self.include_closed:
            raise BadFilter("a phase is that of a running session: leave out --all")

    @property
    def needs_runs(self) -> bool:
        return self.phase in RUN_PHASES or self.profile is not None or self.source is not None

    def runs_query(self) -> str | None:
        """The runs whose sessions are listed, or None when the sessions' own attributes do."""
        if not self.needs_runs:
            return None
        terms = ["WorkflowType = 'AgentRunWorkflow'"]
        if not self.include_closed:
            terms.append("ExecutionStatus = 'Running'")
        if self.phase in RUN_PHASES:
            terms.append(_eq(sa.PHASE.name, self.phase or ""))
        if self.profile is not None:
            terms.append(_eq(sa.AUTH_PROFILE.name, self.profile))
        if self.source is not None:
            terms.append(_eq(sa.SOURCE.name, self.source))
        return " AND ".join(terms)

    def sessions_query(self, keys: Iterable[str] | None = None) -> str | None:
        """The sessions; `keys`: those of the runs `runs_query` found (None when there are
        none: no session matches)."""
        terms = ["WorkflowType = 'SessionWorkflow'"]
        # A closed session is its last workflow run; those it continued from are not sessions.
        status = "!= 'ContinuedAsNew'" if self.include_closed else "= 'Running'"
        terms.append(f"ExecutionStatus {status}")
        if self.phase in SESSION_PHASES:
            terms.append(_eq(sa.PHASE.name, self.phase or ""))
        for attr, value in (
            (sa.MODEL, self.model),
            (sa.LAST_ERROR, self.error),
            (sa.AGENT, self.agent),
            (sa.CHANNEL, self.channel),
        ):
            if value is not None:
                terms.append(_eq(attr.name, value))
        if keys is not None:
            listed = sorted(set(keys))
            if not listed:
                return None
            terms.append(f"{sa.SESSION_KEY.name} IN ({', '.join(quote(k) for k in listed)})")
        return " AND ".join(terms)
