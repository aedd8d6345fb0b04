"""Sub-agents (SPEC §13.4): the settings a run carries and the contracts of the spawn steps.

A `sessions_spawn` call starts a child session `agent:<target>:subagent:<uuid>` whose run is a
child workflow of the calling run. The call's arguments live in the transcript (like every tool
call's); the workflow reads the task through `spawn_read`, decides with the spawn gate
(`workflows/policy/spawn_gate.py`), runs the child, and records its reply with `spawn_record`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agentlane.wire import CompactModel, RunStepInput

SPAWN_TOOL = "sessions_spawn"
SPAWN_READ = "spawn_read"
SPAWN_RECORD = "spawn_record"
SUBAGENT_SEGMENT = ":subagent:"


def subagent_key(target_agent: str, uuid: str) -> str:
    return f"agent:{target_agent}{SUBAGENT_SEGMENT}{uuid}"


def subagent_key_refusal(key: str) -> str | None:
    """Why a sub-agent's key cannot take a message (from `send`, a schedule, a branch), or None
    for any other key: its run is a child of the run that spawned it, which reads its reply."""
    if SUBAGENT_SEGMENT not in key:
        return None
    return (
        f"{key} is a sub-agent's session: the run that spawned it drives it and reads its "
        "reply, so it takes no messages; send to the session that spawned it (watch this one, "
        "read its transcript, decide its approvals)"
    )


class SubagentTools(BaseModel):
    """`[subagents.tools]` (the original's `tools.subagents.tools`)."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] | None = None
    also_allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class SubagentSettings(BaseModel):
    """`[subagents]` in config.toml (the original's `agents.defaults.subagents`)."""

    model_config = ConfigDict(extra="forbid")

    max_spawn_depth: int = Field(default=1, ge=0)
    max_children_per_agent: int = Field(default=5, ge=1)
    # Agents a run may spawn besides its own; "*" allows any.
    allow_agents: list[str] = Field(default_factory=list)
    require_agent_id: bool = False
    tools: SubagentTools = Field(default_factory=SubagentTools)


class SpawnReadInput(RunStepInput):
    tool_call_id: str
    # A session not pinned to a host yet (workspaces per host): the step makes its default
    # workspace where it runs and names that host, which the parent and its children take.
    workspace: str = ""
    create_workspace: bool = False


class SpawnArgsRead(CompactModel):
    """The call's arguments, validated; `error` when they are not usable (then nothing starts)."""

    task: str = ""
    agent_id: str | None = None
    label: str = ""
    error: str = ""
    # The host the step ran on when asked to make the workspace (workspaces per host).
    host: str | None = None


class SpawnRecordInput(RunStepInput):
    tool_call_id: str
    child_session_key: str = ""
    text: str
    is_error: bool = False
    summary: str = ""
