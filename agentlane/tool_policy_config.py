"""The tool policy's settings (SPEC §13.1-13.3): the `[tools]` table of `config.toml`, an agent's
`[agents.<id>.tools]`, and the slice of them one run needs (`ToolPolicyInput`), which is all
that reaches the workflow: names and patterns, never a secret.

File shape (TOML)::

    [tools]
    profile = "coding"                  # minimal | coding | messaging | full
    also_allow = ["message"]            # merged into the profile's allowlist
    allow = ["group:fs", "exec"]        # absent: everything the layers before left
    deny = ["write"]                    # wins over allow; denying write denies apply_patch too
    owner_senders = ["alice"]           # who may use owner-only tools (absent: every sender)
    owner_only = ["exec"]               # more owner-only tools (cron, gateway, nodes,
                                        # whatsapp_login always are)

    [tools.by_provider."openai"]        # or "openai/gpt-4.1": the full key is tried first
    profile = "minimal"
    deny = ["exec"]

    [tools.by_channel.slack]            # messages that came through one channel
    deny = ["exec"]
    [tools.by_channel.slack.groups."C0123"]          # ... to one group (routing.to);
    deny = ["write"]                                  # "C0123:topic:<thread>" for one topic,
    [tools.by_channel.slack.groups."C0123".by_sender."U42"]   # "*" for any other group
    allow = ["read"]                    # a sender's own entry replaces its group's

    [agents.main.tools]                 # the agent's layer, and its own by_provider
    deny = ["exec"]

The pipeline itself is `workflows/policy/tool_policy.py`; this module does no I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentlane.messages import Routing

READ_TOOL_POLICY = "read_tool_policy"

# SPEC §13.1: the four profiles (an unknown profile in a file is refused by the config).
PROFILES = ("minimal", "coding", "messaging", "full")


def _check_patterns(patterns: list[str] | None) -> list[str] | None:
    if patterns is None:
        return None
    for pattern in patterns:
        if not pattern.strip():
            raise ValueError("a tool name or pattern is empty")
    return patterns


def _check_profile(profile: str | None) -> str | None:
    if profile is None:
        return None
    if profile.strip().lower() not in PROFILES:
        raise ValueError(f"{profile!r} is not a tool profile: one of {', '.join(PROFILES)}")
    return profile.strip().lower()


class ToolRules(BaseModel):
    """An allow / deny pair (SPEC §13.2). `allow` absent: no allowlist (everything passes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, patterns: list[str] | None) -> list[str] | None:
        return _check_patterns(patterns)

    def empty(self) -> bool:
        return self.allow is None and not self.deny


class ProviderTools(ToolRules):
    """`by_provider."<provider>"` or `."<provider/model>"`: a profile and allow / deny."""

    profile: str | None = None
    also_allow: list[str] = Field(default_factory=list)

    @field_validator("profile")
    @classmethod
    def _profile(cls, profile: str | None) -> str | None:
        return _check_profile(profile)


class GroupTools(ToolRules):
    by_sender: dict[str, ToolRules] = Field(default_factory=dict)


class ChannelTools(ToolRules):
    groups: dict[str, GroupTools] = Field(default_factory=dict)


class AgentTools(ToolRules):
    """`[agents.<id>.tools]`: the agent's own profile (wins over `[tools]`'s), allow / deny and
    by_provider."""

    profile: str | None = None
    also_allow: list[str] | None = None
    by_provider: dict[str, ProviderTools] = Field(default_factory=dict)

    @field_validator("profile")
    @classmethod
    def _profile(cls, profile: str | None) -> str | None:
        return _check_profile(profile)


class ToolsConfig(ToolRules):
    """`[tools]`."""

    profile: str | None = None
    also_allow: list[str] = Field(default_factory=list)
    by_provider: dict[str, ProviderTools] = Field(default_factory=dict)
    by_channel: dict[str, ChannelTools] = Field(default_factory=dict)
    # None: every sender is an owner. A message with no sender (the CLI, cron, the Python API)
    # is the operator's own and counts as an owner's.
    owner_senders: list[str] | None = None
    owner_only: list[str] = Field(default_factory=list)

    @field_validator("profile")
    @classmethod
    def _profile(cls, profile: str | None) -> str | None:
        return _check_profile(profile)


class Layer(BaseModel):
    """One filter of the pipeline as the run sees it: where it comes from (the config key, for
    people) and its rules."""

    model_config = ConfigDict(frozen=True)

    name: str
    source: str
    rules: ToolRules


class ToolPolicyInput(BaseModel):
    """What one run needs of the tool policy, read once at its start: the layers that do not
    depend on the model, the by-provider tables (the model may change by fallback), and who
    counts as an owner."""

    model_config = ConfigDict(frozen=True)

    agent_id: str = "main"
    profile: str | None = None
    profile_source: str = ""
    also_allow: list[str] = Field(default_factory=list)
    global_rules: ToolRules = ToolRules()
    global_by_provider: dict[str, ProviderTools] = Field(default_factory=dict)
    agent_rules: ToolRules = ToolRules()
    agent_by_provider: dict[str, ProviderTools] = Field(default_factory=dict)
    # The channel and group layers that the run's routing and sender select.
    scoped: list[Layer] = Field(default_factory=list)
    owner_senders: list[str] | None = None
    owner_only: list[str] = Field(default_factory=list)


class ToolPolicyRequest(BaseModel):
    """Input of the `read_tool_policy` activity: the run's agent, routing and first sender."""

    agent_id: str = "main"
    routing: Routing = Routing()
    sender: str | None = None


def policy_input(
    tools: ToolsConfig,
    agent: AgentTools | None,
    agent_id: str,
    routing: Routing,
    sender: str | None,
) -> ToolPolicyInput:
    """The slice of the config one run needs (pure: the worker's activity and the CLI share it)."""
    agent = agent or AgentTools()
    profile = agent.profile or tools.profile
    profile_source = (
        f"agents.{agent_id}.tools.profile" if agent.profile else "tools.profile" if profile else ""
    )
    also_allow = agent.also_allow if agent.also_allow is not None else tools.also_allow
    return ToolPolicyInput(
        agent_id=agent_id,
        profile=profile,
        profile_source=profile_source,
        also_allow=list(also_allow),
        global_rules=ToolRules(allow=tools.allow, deny=tools.deny),
        global_by_provider=dict(tools.by_provider),
        agent_rules=ToolRules(allow=agent.allow, deny=agent.deny),
        agent_by_provider=dict(agent.by_provider),
        scoped=scoped_layers(tools, routing, sender),
        owner_senders=tools.owner_senders,
        owner_only=list(tools.owner_only),
    )


def scoped_layers(tools: ToolsConfig, routing: Routing, sender: str | None) -> list[Layer]:
    """SPEC §13.3's group / channel policy: the channel's own rules, then the group's (its topic
    first, then the group, then "*"); a sender's entry in the group replaces the group's rules,
    as the original's `toolsBySender`."""
    channel = routing.channel
    if not channel or channel not in tools.by_channel:
        return []
    table = tools.by_channel[channel]
    where = f"tools.by_channel.{channel}"
    layers: list[Layer] = []
    if not table.empty():
        layers.append(Layer(name="channel", source=where, rules=table))
    keys = []
    if routing.to and routing.thread:
        keys.append(f"{routing.to}:topic:{routing.thread}")
    if routing.to:
        keys.append(routing.to)
    keys.append("*")
    for key in keys:
        group = table.groups.get(key)
        if group is None:
            continue
        source = f'{where}.groups."{key}"'
        if sender is not None and sender in group.by_sender:
            rules = group.by_sender[sender]
            layers.append(Layer(name="group", source=f'{source}.by_sender."{sender}"', rules=rules))
        elif not group.empty():
            layers.append(Layer(name="group", source=source, rules=group))
        break
    return layers


class ToolReport(BaseModel):
    """`agentlane tools <key>`: what the session's next run is offered, and which layer removed
    each of the other tools."""

    session_key: str
    session_exists: bool
    agent_id: str
    model: str
    routing: Routing = Routing()
    sender: str | None = None
    offered: list[str]
    removed: dict[str, str] = Field(default_factory=dict)
    unknown_entries: list[str] = Field(default_factory=list)
