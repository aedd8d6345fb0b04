"""The spawn gate and a sub-agent's tools (SPEC §13.4, `subagent-depth.ts`,
`subagent-capabilities.ts`, `subagent-spawn.ts`).

Pure functions: the run loop asks `spawn_refusal` before starting a child and `child_tools` for
the tools the child is offered.
"""

from __future__ import annotations

from enum import StrEnum

from agentlane.subagents import SPAWN_TOOL, SUBAGENT_SEGMENT, SubagentSettings

# Denied to every sub-agent, and additionally to leaves (SPEC §13.4).
SUBAGENT_DENY = (
    "gateway",
    "agents_list",
    "whatsapp_login",
    "session_status",
    "cron",
    "sessions_send",
)
LEAF_DENY = ("subagents", "sessions_list", "sessions_history", SPAWN_TOOL)


class Role(StrEnum):
    MAIN = "main"
    ORCHESTRATOR = "orchestrator"
    LEAF = "leaf"


def depth_of(session_key: str, stored: int | None = None) -> int:
    """A session's depth: the stored one, else the number of `:subagent:` segments of its key
    (main sessions are depth 0)."""
    if stored is not None:
        return stored
    return session_key.count(SUBAGENT_SEGMENT)


def role_of(depth: int, max_spawn_depth: int) -> Role:
    if depth <= 0:
        return Role.MAIN
    return Role.ORCHESTRATOR if depth < max(1, max_spawn_depth) else Role.LEAF


def subagent_deny(depth: int | None, settings: SubagentSettings) -> list[str]:
    """The tools a sub-agent of this depth loses (None: depth unknown, taken as 1). Names in
    `allow` / `also_allow` leave the default list; configured `deny` is added (deny wins)."""
    at = 1 if depth is None else depth
    if at <= 0:
        return []
    default = list(SUBAGENT_DENY)
    if role_of(at, settings.max_spawn_depth) == Role.LEAF:
        default += LEAF_DENY
    cfg = settings.tools
    kept = set(cfg.allow or []) | set(cfg.also_allow)
    deny = [name for name in default if name not in kept]
    return deny + [name for name in cfg.deny if name not in deny]


def subagent_allowlist(settings: SubagentSettings) -> list[str] | None:
    """`allow` (with `also_allow` merged in) restricts a sub-agent's tools; `also_allow` alone
    does not."""
    cfg = settings.tools
    if cfg.allow is None:
        return None
    return [*cfg.allow, *(n for n in cfg.also_allow if n not in cfg.allow)]


def child_tools(parent_tools: list[str], child_depth: int, settings: SubagentSettings) -> list[str]:
    """The tools a child run is offered: its parent's, less the deny lists, within the
    allowlist if one is configured."""
    deny = set(subagent_deny(child_depth, settings))
    allow = subagent_allowlist(settings)
    return [t for t in parent_tools if t not in deny and (allow is None or t in allow)]


def depth_refusal(depth: int, settings: SubagentSettings) -> str:
    return (
        f"sessions_spawn is not allowed at this depth (current depth: {depth}, "
        f"max: {settings.max_spawn_depth})"
    )


def denied_tool_refusals(depth: int | None, settings: SubagentSettings) -> dict[str, str]:
    """The tool result a sub-agent gets for calling a tool its depth took away, which it is
    not offered: saying why, rather than that no such tool exists (a model told "not
    available" tends to try again under another name)."""
    at = 1 if depth is None else depth
    if at <= 0:
        return {}
    leaf = role_of(at, settings.max_spawn_depth) == Role.LEAF
    configured = set(settings.tools.deny)
    refusals: dict[str, str] = {}
    for name in subagent_deny(at, settings):
        if name == SPAWN_TOOL and leaf:
            refusals[name] = depth_refusal(at, settings)
            continue
        why = (
            "subagents.tools.deny"
            if name in configured
            else f"denied to sub-agents at depth {at}, subagents.max_spawn_depth "
            f"{settings.max_spawn_depth}"
        )
        refusals[name] = f"Tool {name!r} is not available: the tool policy removed it ({why})."
    return refusals


def refusal_summary(*, caller_depth: int, active_children: int, settings: SubagentSettings) -> str:
    """The one word the UI shows for a refused spawn: a limit the run reached (depth, children
    running at once: it may spawn again later) is not a permission it lacks."""
    if (
        caller_depth >= settings.max_spawn_depth
        or active_children >= settings.max_children_per_agent
    ):
        return "limit reached"
    return "forbidden"


def spawn_refusal(
    *,
    caller_depth: int,
    active_children: int,
    requester_agent: str,
    target_agent: str | None,
    settings: SubagentSettings,
) -> str | None:
    """Why this `sessions_spawn` call is forbidden, in the original's words; None: allowed."""
    if caller_depth >= settings.max_spawn_depth:
        return depth_refusal(caller_depth, settings)
    if active_children >= settings.max_children_per_agent:
        return (
            f"sessions_spawn has reached max active children for this session "
            f"({active_children}/{settings.max_children_per_agent})"
        )
    if settings.require_agent_id and not target_agent:
        return (
            "sessions_spawn requires explicit agentId when requireAgentId is configured. "
            "Use agents_list to see allowed agent ids."
        )
    target = target_agent or requester_agent
    if target != requester_agent:
        allowed = settings.allow_agents
        if "*" not in allowed and target not in allowed:
            shown = ", ".join(allowed) if allowed else "none"
            return f"agentId is not allowed for sessions_spawn (allowed: {shown})"
    return None
