"""Every tool the engine has, in one place: its name, aliases, group (SPEC §13.1) and how it runs.

The tool policy pipeline, the model-call activity (which names it accepts), the run workflow
(which calls run as local activities) and the worker (which activities it hosts) all read this
table, so adding a tool is one row here plus its module under `activities/tools/`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolInfo:
    name: str
    # SPEC §13.1 group, without the `group:` prefix.
    group: str
    aliases: tuple[str, ...] = ()
    # Changes something outside the transcript (a retried attempt must not do it twice).
    mutating: bool = False
    # Takes milliseconds and touches only the workspace: runs as a local activity.
    local: bool = False
    # Offered to a run when its request does not name its tools.
    default: bool = True
    # Never run again by a retried attempt (what it did cannot be known, nor safely repeated):
    # the retry answers "interrupted", so an attempt must not be given up while it still runs.
    run_once: bool = False


TOOLS: tuple[ToolInfo, ...] = (
    ToolInfo("read", "fs", local=True),
    ToolInfo("write", "fs", mutating=True, local=True),
    ToolInfo("edit", "fs", mutating=True, local=True),
    ToolInfo("apply_patch", "fs", aliases=("apply-patch",), mutating=True, local=True),
    ToolInfo("exec", "runtime", aliases=("bash",), mutating=True, run_once=True),
    ToolInfo("process", "runtime", mutating=True, run_once=True),
    # Runs as a child workflow of the run (workflows/subagents.py), not as a tool activity.
    ToolInfo("sessions_spawn", "sessions", mutating=True),
)

RUN_ONCE_TOOLS = frozenset(t.name for t in TOOLS if t.run_once)

_BY_NAME = {t.name: t for t in TOOLS}
_ALIASES = {alias: t.name for t in TOOLS for alias in t.aliases}


def canonical_tool_name(name: str) -> str:
    """SPEC §13.1: trimmed, lower-cased, aliases resolved (`bash` -> `exec`, `apply-patch` ->
    `apply_patch`). A name the engine does not know comes back normalised but unchanged."""
    norm = name.strip().lower()
    return _ALIASES.get(norm, norm)


def tool_info(name: str) -> ToolInfo | None:
    return _BY_NAME.get(canonical_tool_name(name))


def group_tools(group: str) -> list[str]:
    """The tools of `group:<group>` that this engine has."""
    return [t.name for t in TOOLS if t.group == group]


DEFAULT_TOOLS: tuple[str, ...] = tuple(t.name for t in TOOLS if t.default)
