"""The tool policy pipeline (SPEC §13.1-13.3, §18.9 T58 / T59): names, aliases, groups, profiles,
globs with the apply_patch-follows-write rule, the layers in order (each may only remove), the
channel / group / sender layer, owner-only tools, and the config that feeds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentlane.config import ConfigError, build_config, load_config
from agentlane.messages import Routing
from agentlane.tool_policy_config import (
    AgentTools,
    ChannelTools,
    GroupTools,
    ProviderTools,
    ToolRules,
    ToolsConfig,
    policy_input,
)
from workflows.policy.tool_policy import (
    GROUPS,
    OWNER_ONLY_REFUSAL,
    allowed,
    expand,
    normalize,
    select_tools,
)

ALL = ["read", "write", "edit", "apply_patch", "exec", "process", "web_search", "web_fetch"]


def offered(tools: ToolsConfig, agent: AgentTools | None = None, **kw: object) -> list[str]:
    policy = policy_input(tools, agent, "main", Routing(), None)
    provider = str(kw.get("provider", "anthropic"))
    model = str(kw.get("model", "claude"))
    return select_tools(ALL, policy, provider, model).offered


# -- SPEC §18.9 T58 / T59 ----------------------------------------------------------------------


def test_t58_globs_and_apply_patch_follows_write() -> None:
    assert allowed("read", ["*"], []) and allowed("exec", ["*"], [])
    assert not any(allowed(t, None, ["*"]) for t in ALL)
    assert allowed("web_fetch", ["web_*"], [])
    assert not allowed("web_search", None, ["web_*"])
    assert allowed("apply_patch", ["write"], [])
    assert not allowed("apply_patch", None, ["write"])


def test_t59_groups_aliases_case_and_spaces() -> None:
    allow, deny = ["group:fs", "BASH"], ["apply_*"]
    assert allowed("read", allow, deny) and allowed("exec", allow, deny)
    assert not allowed("apply_patch", allow, deny)
    assert allowed("WEB_FETCH", [" WEB_* "], [])
    assert not allowed("web_fetch", ["*"], ["web_*"]) and allowed("read", ["*"], ["web_*"])
    assert allowed("read", [], ["web_*"])


def test_names_aliases_and_groups() -> None:
    assert normalize("  Bash ") == "exec" and normalize("apply-patch") == "apply_patch"
    assert expand(["group:runtime"]) == ["exec", "process", "code_execution"]
    assert "read" not in GROUPS["group:openclaw"] and "cron" in GROUPS["group:openclaw"]
    assert expand(["group:plugins", ""], plugins=["my_tool"]) == ["my_tool"]
    # A pattern without `*` is an exact name, not a prefix; other characters are literal.
    assert not allowed("reader", ["read"], []) and not allowed("rxad", ["r.ad*"], [])


# -- profiles and layers -------------------------------------------------------------------------


def test_profiles() -> None:
    assert offered(ToolsConfig(profile="minimal")) == []
    assert offered(ToolsConfig(profile="coding")) == [t for t in ALL]
    assert offered(ToolsConfig(profile="messaging")) == []
    assert offered(ToolsConfig(profile="full")) == ALL
    # also_allow is merged into the profile's allowlist.
    assert offered(ToolsConfig(profile="minimal", also_allow=["read", "write"])) == [
        "read",
        "write",
        "apply_patch",
    ]


def test_an_unknown_profile_restricts_nothing_in_the_pure_policy() -> None:
    policy = policy_input(ToolsConfig(), None, "main", Routing(), None).model_copy(
        update={"profile": "nonesuch"}
    )
    assert select_tools(ALL, policy, "a", "b").offered == ALL


def test_each_layer_only_removes_and_names_itself() -> None:
    tools = ToolsConfig(
        profile="coding",
        deny=["web_search"],
        by_provider={
            "anthropic": ProviderTools(deny=["web_fetch"]),
            "openai": ProviderTools(profile="minimal"),
        },
    )
    agent = AgentTools(
        deny=["process"],
        allow=["*"],
        by_provider={"anthropic/claude": ProviderTools(deny=["edit"])},
    )
    policy = policy_input(tools, agent, "main", Routing(), None)
    got = select_tools([*ALL, "message"], policy, "anthropic", "claude")
    assert got.offered == ["read", "write", "apply_patch", "exec"]
    assert got.removed == {
        "message": "profile coding (tools.profile)",
        "web_search": "global (tools)",
        "web_fetch": 'global by provider (tools.by_provider."anthropic")',
        "process": "agent (agents.main.tools)",
        "edit": 'agent by provider (agents.main.tools.by_provider."anthropic/claude")',
    }
    # An agent's allow ["*"] cannot bring back what an earlier layer removed, and a call to a
    # removed tool is refused naming the layer.
    assert "web_search" not in got.offered
    assert "agent (agents.main.tools)" in got.refusals["process"]
    # Another provider: its profile layer.
    other = select_tools(ALL, policy, "openai", "gpt")
    assert other.offered == []
    assert other.removed["read"] == 'provider profile minimal (tools.by_provider."openai".profile)'


def test_by_provider_tries_provider_slash_model_first() -> None:
    tools = ToolsConfig(
        by_provider={
            "openai/gpt-4.1": ProviderTools(deny=["exec"]),
            "openai": ProviderTools(deny=["read"]),
        }
    )
    assert "exec" not in offered(tools, provider="openai", model="gpt-4.1")
    assert "read" in offered(tools, provider="openai", model="gpt-4.1")
    assert "read" not in offered(tools, provider="openai", model="gpt-5")


def test_the_agents_profile_wins_over_the_global_one() -> None:
    got = offered(ToolsConfig(profile="minimal"), AgentTools(profile="full"))
    assert got == ALL


def test_no_policy_offers_everything() -> None:
    assert select_tools(ALL, None, "a", "b").offered == ALL
    assert offered(ToolsConfig()) == ALL


# -- channel / group / sender --------------------------------------------------------------------


def test_channel_group_topic_and_sender_layers() -> None:
    tools = ToolsConfig(
        by_channel={
            "slack": ChannelTools(
                deny=["exec"],
                groups={
                    "C1": GroupTools(deny=["write"], by_sender={"U1": ToolRules(allow=["read"])}),
                    "C1:topic:7": GroupTools(deny=["read"]),
                    "*": GroupTools(deny=["edit"]),
                },
            )
        }
    )

    def run(routing: Routing, sender: str | None = None) -> tuple[list[str], dict[str, str]]:
        got = select_tools(ALL, policy_input(tools, None, "main", routing, sender), "a", "b")
        return got.offered, got.removed

    assert run(Routing(channel="telegram"))[0] == ALL
    tools_, removed = run(Routing(channel="slack", to="C1"))
    assert "exec" not in tools_ and "write" not in tools_ and "apply_patch" not in tools_
    assert removed["exec"] == "channel (tools.by_channel.slack)"
    assert removed["write"] == 'group (tools.by_channel.slack.groups."C1")'
    assert "read" not in run(Routing(channel="slack", to="C1", thread="7"))[0]
    assert "edit" not in run(Routing(channel="slack", to="C9"))[0]
    # The sender's own entry replaces the group's rules (the channel's still apply).
    only, removed = run(Routing(channel="slack", to="C1"), sender="U1")
    assert only == ["read"]
    assert removed["write"].endswith('by_sender."U1")')


# -- owner-only ------------------------------------------------------------------------------------


def test_owner_only_tools_are_removed_for_non_owner_senders() -> None:
    tools = ToolsConfig(owner_senders=["alice"], owner_only=["exec"])
    policy = policy_input(tools, None, "main", Routing(), None)
    available = [*ALL, "cron"]
    owner = select_tools(available, policy, "a", "b", ["alice"])
    assert "exec" in owner.offered and "cron" in owner.offered
    mallory = select_tools(available, policy, "a", "b", ["alice", "mallory"])
    assert "exec" not in mallory.offered and "cron" not in mallory.offered
    assert mallory.refusals["exec"] == OWNER_ONLY_REFUSAL == "Tool restricted to owner senders."
    # No sender (the CLI, cron): the operator's own.
    assert "exec" in select_tools(available, policy, "a", "b", [None]).offered
    # No owners configured: everyone is one.
    open_policy = policy_input(ToolsConfig(owner_only=["exec"]), None, "main", Routing(), None)
    assert "exec" in select_tools(ALL, open_policy, "a", "b", ["mallory"]).offered


def test_an_owner_only_write_takes_apply_patch_and_groups_expand() -> None:
    # apply_patch writes any file: an owner-only `write` that left it would restrict nothing.
    policy = policy_input(
        ToolsConfig(owner_senders=["alice"], owner_only=["write", "group:runtime"]),
        None,
        "main",
        Routing(),
        None,
    )
    mallory = select_tools(ALL, policy, "a", "b", ["mallory"])
    for tool in ("write", "apply_patch", "exec", "process"):
        assert tool not in mallory.offered and mallory.refusals[tool] == OWNER_ONLY_REFUSAL
    assert "read" in mallory.offered and "edit" in mallory.offered
    assert "apply_patch" in select_tools(ALL, policy, "a", "b", ["alice"]).offered


def test_unknown_allow_entries_are_reported() -> None:
    policy = policy_input(
        ToolsConfig(allow=["raed", "group:fs", "web_*"]), None, "m", Routing(), None
    )
    assert select_tools(ALL, policy, "a", "b").unknown_entries == ["raed"]


# -- the config ----------------------------------------------------------------------------------


def test_the_config_file_feeds_every_layer(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        """
[tools]
profile = "coding"
deny = ["web_*"]
owner_senders = ["alice"]
[tools.by_provider."offline"]
deny = ["process"]
[tools.by_channel.slack.groups."*"]
deny = ["edit"]
[agents.main]
tools_deny = ["exec"]
[agents.main.tools]
deny = ["write"]
"""
    )
    config = load_config(path=path)
    agent = config.agent("main").tool_rules()
    assert agent.deny == ["write", "exec"]
    policy = policy_input(config.tools, agent, "main", Routing(channel="slack", to="G"), None)
    got = select_tools(ALL, policy, "offline", "planner")
    assert got.offered == ["read"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"tools": {"profile": "mini"}}, "tools.profile"),
        ({"tools": {"denny": ["x"]}}, "unknown key tools.denny (did you mean 'deny'?)"),
        ({"tools": {"deny": "exec"}}, "tools.deny"),
        ({"tools": {"allow": [" "]}}, "empty"),
        ({"tools": {"by_provider": {"openai": {"profle": "x"}}}}, "by_provider.openai.profle"),
        ({"agents": {"main": {"tools": {"alow": ["x"]}}}}, "agents.main.tools.alow"),
        ({"tools": {"by_channel": {"s": {"groups": {"g": {"by_sender": {"u": {"x": 1}}}}}}}}, "x"),
    ],
)
def test_bad_tool_settings_are_refused_naming_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(raw, {}, source="cfg.toml")
    assert "cfg.toml" in str(err.value) and message in str(err.value)


def test_config_check_finds_unknown_allow_entries_anywhere() -> None:
    from workflows.policy.tool_policy import config_allow_entries, unknown_names

    config = build_config(
        {
            "tools": {
                "allow": ["read", "group:fs"],
                "by_channel": {"s": {"groups": {"g": {"by_sender": {"u": {"allow": ["wirte"]}}}}}},
            },
            "agents": {
                "main": {"tools": {"by_provider": {"x": {"also_allow": ["Exec", "sesion"]}}}}
            },
        },
        {},
    )
    agents = [a.tool_rules() for a in config.agents.values()]
    entries = config_allow_entries(config.tools, agents)
    assert sorted(unknown_names(entries, ["read"])) == ["sesion", "wirte"]
