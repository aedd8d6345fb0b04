"""SPEC §13.4: depth, roles, the sub-agent deny lists and the spawn gate's messages."""

from __future__ import annotations

from agentlane.subagents import SubagentSettings, SubagentTools, subagent_key
from workflows.policy.spawn_gate import (
    LEAF_DENY,
    SUBAGENT_DENY,
    Role,
    child_tools,
    denied_tool_refusals,
    depth_of,
    role_of,
    spawn_refusal,
    subagent_allowlist,
    subagent_deny,
)

DEFAULTS = SubagentSettings()


def refusal(**kw: object) -> str | None:
    args: dict[str, object] = {
        "caller_depth": 0,
        "active_children": 0,
        "requester_agent": "main",
        "target_agent": None,
        "settings": DEFAULTS,
    }
    args.update(kw)
    return spawn_refusal(**args)  # type: ignore[arg-type]


def test_defaults_are_the_originals() -> None:
    assert DEFAULTS.max_spawn_depth == 1
    assert DEFAULTS.max_children_per_agent == 5


def test_depth_stored_else_from_the_key() -> None:
    assert depth_of("main-chat") == 0
    key = subagent_key("main", "u1")
    assert key == "agent:main:subagent:u1"
    assert depth_of(key) == 1
    assert depth_of(key + ":subagent:u2") == 2
    assert depth_of(key, stored=3) == 3


def test_roles() -> None:
    assert role_of(0, 1) == Role.MAIN
    assert role_of(1, 1) == Role.LEAF
    assert role_of(1, 2) == Role.ORCHESTRATOR
    assert role_of(2, 2) == Role.LEAF
    assert role_of(1, 0) == Role.LEAF  # max(1, maxSpawnDepth)


def test_deny_lists() -> None:
    assert subagent_deny(0, DEFAULTS) == []
    leaf = subagent_deny(1, DEFAULTS)
    assert leaf == [*SUBAGENT_DENY, *LEAF_DENY]
    nested = SubagentSettings(max_spawn_depth=2)
    assert subagent_deny(1, nested) == list(SUBAGENT_DENY)
    # Depth not given counts as 1: a leaf with the default maximum.
    assert subagent_deny(None, DEFAULTS) == leaf


def test_allow_and_also_allow_leave_the_default_list_and_deny_wins() -> None:
    settings = SubagentSettings(
        tools=SubagentTools(also_allow=["sessions_spawn"], deny=["exec", "cron"])
    )
    deny = subagent_deny(1, settings)
    assert "sessions_spawn" not in deny
    assert "exec" in deny and deny.count("cron") == 1
    allow = SubagentSettings(tools=SubagentTools(allow=["read", "cron"], also_allow=["exec"]))
    assert "cron" not in subagent_deny(1, allow)
    assert subagent_allowlist(allow) == ["read", "cron", "exec"]
    # also_allow alone makes no allowlist.
    assert subagent_allowlist(settings) is None


def test_child_tools() -> None:
    parent = ["read", "write", "edit", "exec", "sessions_spawn"]
    assert child_tools(parent, 1, DEFAULTS) == ["read", "write", "edit", "exec"]
    assert child_tools(parent, 1, SubagentSettings(max_spawn_depth=2)) == parent
    only = SubagentSettings(tools=SubagentTools(allow=["read"]))
    assert child_tools(parent, 1, only) == ["read"]


def test_gate_depth() -> None:
    assert refusal() is None
    assert refusal(caller_depth=1) == (
        "sessions_spawn is not allowed at this depth (current depth: 1, max: 1)"
    )
    nested = SubagentSettings(max_spawn_depth=2)
    assert refusal(caller_depth=1, settings=nested) is None
    assert refusal(caller_depth=2, settings=nested) == (
        "sessions_spawn is not allowed at this depth (current depth: 2, max: 2)"
    )


def test_a_tool_the_depth_took_away_is_refused_saying_why() -> None:
    leaf = denied_tool_refusals(1, DEFAULTS)
    assert set(leaf) == {*SUBAGENT_DENY, *LEAF_DENY}
    # The spawn tool in the gate's own words, so a leaf hears what an allowed spawn would.
    assert leaf["sessions_spawn"] == refusal(caller_depth=1)
    assert leaf["cron"] == (
        "Tool 'cron' is not available: the tool policy removed it (denied to sub-agents at "
        "depth 1, subagents.max_spawn_depth 1)."
    )
    nested = SubagentSettings(max_spawn_depth=2, tools=SubagentTools(deny=["exec"]))
    middle = denied_tool_refusals(1, nested)
    assert "sessions_spawn" not in middle
    assert middle["exec"].endswith("(subagents.tools.deny).")
    assert denied_tool_refusals(0, DEFAULTS) == {}


def test_gate_children() -> None:
    assert refusal(active_children=4) is None
    message = refusal(active_children=5)
    assert message == "sessions_spawn has reached max active children for this session (5/5)"


def test_gate_require_agent_id() -> None:
    settings = SubagentSettings(require_agent_id=True)
    message = refusal(settings=settings)
    assert message is not None and message.startswith("sessions_spawn requires explicit agentId")
    assert refusal(settings=settings, target_agent="main") is None


def test_gate_allow_agents() -> None:
    # Its own agent is always allowed; another only if listed, or with "*".
    assert refusal(target_agent="main") is None
    assert refusal(target_agent="ops") == (
        "agentId is not allowed for sessions_spawn (allowed: none)"
    )
    listed = SubagentSettings(allow_agents=["ops"])
    assert refusal(target_agent="ops", settings=listed) is None
    assert refusal(target_agent="qa", settings=listed) == (
        "agentId is not allowed for sessions_spawn (allowed: ops)"
    )
    assert refusal(target_agent="qa", settings=SubagentSettings(allow_agents=["*"])) is None
