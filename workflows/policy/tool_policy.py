"""The tool policy pipeline (SPEC §13.1-13.3): which of the run's tools a model call is offered,
which layer removed each of the others, and what a call to a removed tool is answered.

SPEC §13.1 names, aliases, groups, profiles: names are trimmed and lowercased; `bash` is
`exec`, `apply-patch` is `apply_patch`; `group:*` entries expand before matching; the profiles
`minimal`, `coding`, `messaging` are allowlists, `full` (or an unknown profile) restricts
nothing.

SPEC §13.2 glob matching: `*` alone matches all; a pattern without `*` is an exact name;
otherwise each `*` matches any run of characters. A tool matching a deny pattern is denied
(`apply_patch` too when `write` matches one); an absent or empty allowlist allows; otherwise the
tool (or `apply_patch` when `write` does) must match an allow pattern.

SPEC §13.3 pipeline, successive filters that may only remove tools: profile (the agent's or
`tools.profile`, with `also_allow` merged into its allowlist) -> provider profile
(`tools.by_provider`, "provider/model" tried before "provider") -> global allow / deny ->
global by provider -> agent -> agent by provider -> channel / group. Then owner-only tools
(whatsapp_login, cron, gateway, nodes and those the config names) are removed for a run that
has a sender who is not an owner; a call to one anyway is answered "Tool restricted to owner
senders.".

Pure functions over pydantic models, no I/O; the run calls `select_tools` where it builds a
model call's tool list.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from agentlane.tool_policy_config import (
    AgentTools,
    Layer,
    ProviderTools,
    ToolPolicyInput,
    ToolRules,
    ToolsConfig,
)

ALIASES = {"bash": "exec", "apply-patch": "apply_patch"}

GROUPS: dict[str, tuple[str, ...]] = {
    "group:fs": ("read", "write", "edit", "apply_patch"),
    "group:runtime": ("exec", "process", "code_execution"),
    "group:web": ("web_search", "web_fetch", "x_search"),
    "group:memory": ("memory_search", "memory_get"),
    "group:sessions": (
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "sessions_yield",
        "subagents",
        "session_status",
    ),
    "group:ui": ("browser", "canvas"),
    "group:messaging": ("message",),
    "group:automation": ("cron", "gateway"),
    "group:nodes": ("nodes",),
    "group:agents": ("agents_list", "update_plan"),
    "group:media": ("image", "image_generate", "music_generate", "video_generate", "tts"),
}
OWNER_ONLY = ("whatsapp_login", "cron", "gateway", "nodes")
# Every core tool the original knows (the groups' members and the owner-only ones); a tool
# registered here and named nowhere in this list is a plugin tool (`group:plugins`).
CORE_TOOLS: frozenset[str] = frozenset(
    {name for members in GROUPS.values() for name in members} | set(OWNER_ONLY)
)
_NOT_OPENCLAW = frozenset({"read", "write", "edit", "apply_patch", "exec", "process"})
GROUPS["group:openclaw"] = tuple(sorted(CORE_TOOLS - _NOT_OPENCLAW))

PROFILES: dict[str, tuple[str, ...] | None] = {
    "minimal": ("session_status",),
    "coding": (
        "read",
        "write",
        "edit",
        "apply_patch",
        "exec",
        "process",
        "code_execution",
        "web_search",
        "web_fetch",
        "x_search",
        "memory_search",
        "memory_get",
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "sessions_spawn",
        "sessions_yield",
        "subagents",
        "session_status",
        "cron",
        "update_plan",
        "image",
        "image_generate",
        "music_generate",
        "video_generate",
    ),
    "messaging": (
        "sessions_list",
        "sessions_history",
        "sessions_send",
        "session_status",
        "message",
    ),
    "full": None,
}

OWNER_ONLY_REFUSAL = "Tool restricted to owner senders."


def normalize(name: str) -> str:
    """SPEC §13.1: trimmed, lowercased, aliases resolved."""
    key = name.strip().lower()
    return ALIASES.get(key, key)


def expand(entries: Iterable[str], plugins: Sequence[str] = ()) -> list[str]:
    """Normalized names and patterns with `group:*` entries expanded (`group:plugins`: the
    registered tools that are not core tools). Empty entries are dropped."""
    out: list[str] = []
    for entry in entries:
        key = normalize(entry)
        if not key:
            continue
        if key == "group:plugins":
            out.extend(plugins)
        elif key in GROUPS:
            out.extend(GROUPS[key])
        else:
            out.append(key)
    return out


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """None: match all. A pattern without `*` is compiled too (an exact, anchored match)."""
    if pattern == "*":
        return None
    return re.compile("^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$")


def matches(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return pattern == name
    compiled = _compiled(pattern)
    return compiled is None or compiled.fullmatch(name) is not None


def _any(patterns: Sequence[str], name: str) -> bool:
    return any(matches(p, name) for p in patterns)


def allowed(
    name: str, allow: Sequence[str] | None, deny: Sequence[str], plugins: Sequence[str] = ()
) -> bool:
    """SPEC §13.2's decision for one tool against one allow / deny pair (raw config entries)."""
    return _decide(normalize(name), expand(allow or (), plugins), expand(deny, plugins))


def _decide(tool: str, allowlist: Sequence[str], denied: Sequence[str]) -> bool:
    """`allowed` over a normalized name and expanded patterns (expanded once per layer)."""
    if _any(denied, tool) or (tool == "apply_patch" and _any(denied, "write")):
        return False
    if not allowlist:
        return True
    return _any(allowlist, tool) or (tool == "apply_patch" and _any(allowlist, "write"))


def profile_allowlist(profile: str | None, also_allow: Sequence[str] = ()) -> list[str] | None:
    """The profile's allowlist with `also_allow` merged; None: no restriction (no profile,
    `full`, or a profile this engine does not know)."""
    if profile is None:
        return None
    base = PROFILES.get(profile.strip().lower())
    if base is None:
        return None
    return [*base, *also_allow]


class ToolSelection(BaseModel):
    """What a model call is offered, and what became of the other tools."""

    model_config = ConfigDict(frozen=True)

    offered: list[str]
    # Tool -> the layer that removed it, as "<layer> (<config key>)".
    removed: dict[str, str] = Field(default_factory=dict)
    # Tool -> the tool result a call to it gets.
    refusals: dict[str, str] = Field(default_factory=dict)
    # Allowlist entries that name no known or registered tool (SPEC §13.3: only a warning).
    unknown_entries: list[str] = Field(default_factory=list)


def by_provider(
    table: dict[str, ProviderTools], provider: str, model: str
) -> tuple[str, ProviderTools] | None:
    """SPEC §13.3: the "provider/model" entry first, then the provider's."""
    for key in (f"{provider}/{model}", provider):
        if key in table:
            return key, table[key]
        lowered = key.lower()
        for candidate, entry in table.items():
            if candidate.strip().lower() == lowered:
                return candidate, entry
    return None


def pipeline_layers(policy: ToolPolicyInput, provider: str, model: str) -> list[Layer]:
    """The filters in SPEC §13.3's order, for a call on `provider/model`; layers that
    configure nothing are left out."""
    layers: list[Layer] = []
    allowlist = profile_allowlist(policy.profile, policy.also_allow)
    if allowlist is not None:
        layers.append(
            Layer(
                name=f"profile {policy.profile}",
                source=policy.profile_source,
                rules=ToolRules(allow=allowlist),
            )
        )
    global_entry = by_provider(policy.global_by_provider, provider, model)
    agent_entry = by_provider(policy.agent_by_provider, provider, model)
    if global_entry is not None:
        key, entry = global_entry
        provider_list = profile_allowlist(entry.profile, entry.also_allow)
        if provider_list is not None:
            layers.append(
                Layer(
                    name=f"provider profile {entry.profile}",
                    source=f'tools.by_provider."{key}".profile',
                    rules=ToolRules(allow=provider_list),
                )
            )
    if not policy.global_rules.empty():
        layers.append(Layer(name="global", source="tools", rules=policy.global_rules))
    if global_entry is not None and not global_entry[1].empty():
        key, entry = global_entry
        layers.append(
            Layer(
                name="global by provider",
                source=f'tools.by_provider."{key}"',
                rules=ToolRules(allow=entry.allow, deny=entry.deny),
            )
        )
    agent_source = f"agents.{policy.agent_id}.tools"
    if not policy.agent_rules.empty():
        layers.append(Layer(name="agent", source=agent_source, rules=policy.agent_rules))
    if agent_entry is not None:
        key, entry = agent_entry
        agent_list = profile_allowlist(entry.profile, entry.also_allow)
        rules = [ToolRules(allow=entry.allow, deny=entry.deny)]
        if agent_list is not None:
            rules.insert(0, ToolRules(allow=agent_list))
        for rule in rules:
            if not rule.empty():
                layers.append(
                    Layer(
                        name="agent by provider",
                        source=f'{agent_source}.by_provider."{key}"',
                        rules=rule,
                    )
                )
    layers.extend(policy.scoped)
    return layers


def is_owner(sender: str | None, owner_senders: Sequence[str] | None) -> bool:
    """No configured owners: everyone is one. A message without a sender is the operator's."""
    if owner_senders is None or sender is None:
        return True
    return sender in owner_senders


def select_tools(
    available: Sequence[str],
    policy: ToolPolicyInput | None,
    provider: str,
    model: str,
    senders: Sequence[str | None] = (),
) -> ToolSelection:
    """The tools of `available` a model call on `provider/model` is offered, for a run whose
    messages came from `senders`. `policy` None (a run recorded before the policy existed):
    everything is offered."""
    if policy is None:
        return ToolSelection(offered=list(available))
    tools = [normalize(t) for t in available]
    plugins = [t for t in tools if t not in CORE_TOOLS]
    removed: dict[str, str] = {}
    remaining = list(tools)
    for layer in pipeline_layers(policy, provider, model):
        label = f"{layer.name} ({layer.source})" if layer.source else layer.name
        kept = []
        allowlist = expand(layer.rules.allow or (), plugins)
        denied = expand(layer.rules.deny, plugins)
        for tool in remaining:
            if _decide(tool, allowlist, denied):
                kept.append(tool)
            else:
                removed[tool] = label
        remaining = kept
    refusals = {
        tool: f"Tool {tool!r} is not available: the tool policy removed it ({layer})."
        for tool, layer in removed.items()
    }
    owners_only = set(OWNER_ONLY) | {normalize(t) for t in policy.owner_only}
    if not all(is_owner(s, policy.owner_senders) for s in senders):
        # Matched as a deny list is (groups, globs, and `apply_patch` with `write`): an
        # owner-only `write` that left `apply_patch` would be no restriction at all.
        restricted = expand(sorted(owners_only), plugins)
        for tool in [t for t in remaining if not _decide(t, [], restricted)]:
            removed[tool] = "owner-only (tools.owner_senders)"
            refusals[tool] = OWNER_ONLY_REFUSAL
        remaining = [t for t in remaining if t not in removed]
    return ToolSelection(
        offered=remaining,
        removed=removed,
        refusals=refusals,
        unknown_entries=unknown_entries(policy, tools),
    )


def unknown_entries(policy: ToolPolicyInput, registered: Sequence[str]) -> list[str]:
    """Allow entries that are no group, no pattern and no tool the original or this engine
    knows: a typo that silently allows nothing (SPEC §13.3 warns, deduplicated)."""
    entries = [*policy.also_allow, *(policy.global_rules.allow or ())]
    entries += policy.agent_rules.allow or ()
    for table in (policy.global_by_provider, policy.agent_by_provider):
        for entry in table.values():
            entries += [*(entry.allow or ()), *entry.also_allow]
    for layer in policy.scoped:
        entries += layer.rules.allow or ()
    return unknown_names(entries, registered)


def unknown_names(entries: Iterable[str], registered: Iterable[str]) -> list[str]:
    """The entries that are no group, no pattern and no known or registered tool (at most 256,
    each once)."""
    known = CORE_TOOLS | set(registered) | {"group:plugins"} | set(GROUPS)
    out: list[str] = []
    for entry in entries:
        key = normalize(entry)
        if key and "*" not in key and key not in known and key not in out:
            out.append(key)
    return out[:256]


def config_allow_entries(tools: ToolsConfig, agents: Iterable[AgentTools]) -> list[str]:
    """Every allowlist entry of the config (`config check` warns about unknown ones)."""
    entries = [*tools.also_allow, *(tools.allow or ())]
    tables = [tools.by_provider]
    for agent in agents:
        entries += [*(agent.allow or ()), *(agent.also_allow or ())]
        tables.append(agent.by_provider)
    for table in tables:
        for entry in table.values():
            entries += [*(entry.allow or ()), *entry.also_allow]
    for channel in tools.by_channel.values():
        entries += channel.allow or ()
        for group in channel.groups.values():
            entries += group.allow or ()
            for rules in group.by_sender.values():
                entries += rules.allow or ()
    return entries
