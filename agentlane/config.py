"""Model registry, agents and auth-profile routing: the configuration every role can read.

No secrets here: keys live in the auth store (`activities/auth_store.py`), read by activities only.
A config names auth profiles by id; an `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` in the environment
implies the env-backed profile `anthropic:env` / `openai:env`.

Sources, later ones winning: the built-in catalogue (`agentlane.model_catalog`), a TOML or JSON
file (`AGENTLANE_CONFIG`, else `<data_dir>/config.toml` or `config.json` if present), then the
environment (`AGENTLANE_MODEL` picks the default model). A file entry for a model the catalogue
already knows is merged field by field over it, so `context_window = 32000` alone is enough.

File shape (TOML)::

    default_model = "anthropic/claude-sonnet-4-5"

    [[models]]
    provider = "ollama"
    id = "qwen3:8b"
    api = "openai-compatible"
    base_url = "http://127.0.0.1:11434/v1"
    context_window = 40960

    [agents.main]
    model = "anthropic/claude-sonnet-4-5"
    fallbacks = ["openai/gpt-4.1"]
    thinking = "low"

    [auth.profiles."anthropic:work"]
    provider = "anthropic"
    type = "api_key"

    [auth.order]
    anthropic = ["anthropic:work", "anthropic:env"]

    [auth.cooldowns]
    rate_limited_profile_rotations = 2
    billing_backoff_hours = 5

    [webhooks]                       # callback hosts inside the network (none by default)
    allow = ["hooks.internal", "10.1.0.0/16"]

    [tools]                          # the tool policy (agentlane/tool_policy_config.py)
    deny = ["exec"]

The loader reads files and the environment only when called; importing this module does no I/O.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import stat
import tomllib
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from agentlane.approvals import ApprovalConfig
from agentlane.compaction_config import CompactionConfig
from agentlane.headers import AuthHeader, HeaderError, check_headers
from agentlane.loop_detection_config import LoopDetectionConfig
from agentlane.profile_state import AuthCooldowns
from agentlane.queue_settings import QueueConfig
from agentlane.reasoning_modes import reasoning_mode_problem
from agentlane.subagents import SubagentSettings, SubagentTools
from agentlane.thinking_levels import THINKING_LEVELS, normalize_thinking_level
from agentlane.tool_policy_config import (
    AgentTools,
    ChannelTools,
    GroupTools,
    ProviderTools,
    ToolRules,
    ToolsConfig,
)
from agentlane.webhook_targets import WebhookPolicy

# SPEC §9: the window when nothing says otherwise, and the guard's thresholds.
DEFAULT_CONTEXT_WINDOW = 200_000
CONTEXT_WINDOW_WARN_BELOW = 32_000
CONTEXT_WINDOW_BLOCK_BELOW = 16_000
DEFAULT_MAX_OUTPUT_TOKENS = 8_192
_log = logging.getLogger("agentlane.config")
DEFAULT_MODEL_REF = "offline/planner"

# Providers whose key, when found in the environment, implies a profile `<provider>:env`.
ENV_KEY_VARIABLES = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
ENV_PROFILE_SUFFIX = "env"


# A validation error whose message says everything and whose input is not repeated (header values
# may be a secret written into the file by mistake).
QUIET_ERROR = "agentlane_quiet"


class ConfigError(Exception):
    """The configuration cannot be read or does not make sense."""


class UnknownModelError(ConfigError):
    def __init__(self, ref: str, known: list[str], where: str = "") -> None:
        self.ref = ref
        self.known = known
        self.where = where
        super().__init__(
            (f"invalid configuration in {where}: " if where else "")
            + f"unknown model {ref!r}; known models: {', '.join(known)}. "
            "Add it under [[models]] in the config file."
        )


class UnknownAgentError(ConfigError):
    pass


class ApiKind(StrEnum):
    ANTHROPIC = "anthropic"
    OPENAI_CHAT = "openai-chat"
    OPENAI_RESPONSES = "openai-responses"
    OPENAI_COMPATIBLE = "openai-compatible"
    OFFLINE = "offline"


class ModelPrices(BaseModel):
    """US dollars per million tokens. Input and output are required: a price left out would
    silently be 0. Cache prices left out are the input price (a cache read is never dearer)."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class ModelCapabilities(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tools: bool = True
    images: bool = False
    thinking_levels: list[str] = Field(default_factory=lambda: ["off"])
    # OpenAI strict function schemas (see activities/providers/tool_schemas.py).
    strict_tools: bool = False


class ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str = Field(min_length=1)
    id: str = Field(min_length=1)
    api: ApiKind
    base_url: str | None = None
    context_window: int = Field(default=DEFAULT_CONTEXT_WINDOW, gt=0)
    max_output_tokens: int = Field(default=DEFAULT_MAX_OUTPUT_TOKENS, gt=0)
    capabilities: ModelCapabilities = ModelCapabilities()
    # None: unpriced (its calls are counted, never priced at 0); the catalogue's models have
    # their list prices, a model of the config file has the prices it states.
    prices: ModelPrices | None = None
    # A lighter model of the same provider that writes this model's compaction summaries
    # ("provider/model"); None: the model summarises its own context.
    summariser: str | None = None
    # None: a key is needed except for the offline model, OpenAI-compatible servers (a local
    # vLLM, Ollama or llama.cpp usually takes none) and models that send no auth header.
    key_required: bool | None = None
    # For gateways and proxies (agentlane/headers.py): how the key is sent (None: as the SDK
    # sends it), and headers sent with every call; a value "env:NAME" is read from the worker's
    # environment at call time. An auth profile's own settings win over these. Header values are
    # left out of reprs: literals are not secret, but logs have no need of them.
    auth_header: AuthHeader | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if (
            parts.scheme not in ("http", "https")
            or not parts.netloc
            or any(ch.isspace() for ch in url)
        ):
            raise PydanticCustomError(
                QUIET_ERROR,
                "{reason}",
                {
                    "reason": f"{url!r} is not a URL; write it as http://host:port/path or "
                    "https://host/path"
                },
            )
        return url

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        try:
            check_headers(headers, allow_env=True)
        except HeaderError as err:
            raise PydanticCustomError(QUIET_ERROR, "{reason}", {"reason": str(err)}) from None
        return headers

    @property
    def ref(self) -> str:
        return f"{self.provider}/{self.id}"

    @property
    def needs_key(self) -> bool:
        if self.key_required is not None:
            return self.key_required
        if self.auth_header == "none":
            return False
        return self.api not in (ApiKind.OFFLINE, ApiKind.OPENAI_COMPATIBLE)


class AuthProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    provider: str
    type: Literal["oauth", "token", "api_key"] = "api_key"
    # Implied by a key in the environment (`anthropic:env`), not written in the config: it
    # does not make the config's profile list explicit (SPEC §7.3 base order).
    implied: bool = Field(default=False, exclude=True)


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    # None: the config's `default_model` (an `[agents.main.tools]` table alone names no model).
    model: str | None = None
    fallbacks: list[str] = Field(default_factory=list)
    # The thinking level a new session of this agent starts at (SPEC §6 words; `send
    # --thinking` overrides it).
    thinking: str = "off"
    # What a new session of this agent shows of the model's reasoning: off, on, stream
    # (agentlane/reasoning_modes.py; `send --reasoning` overrides it).
    reasoning: str = "off"
    # The agent's tool policy layer (`[agents.<id>.tools]`); `tools_allow` / `tools_deny` are
    # its older spelling, merged into it.
    tools: AgentTools | None = None
    tools_allow: list[str] | None = None
    tools_deny: list[str] = Field(default_factory=list)
    # Caps the model's window when smaller (SPEC §9, agents.defaults.contextTokens).
    context_tokens: int | None = Field(default=None, gt=0)
    # A new session's LLM idle limit (seconds of model silence; 0: none) and its bound on
    # waiting for cooling profiles and server errors; None: the defaults (120 s for chat runs,
    # 600 s).
    idle_timeout_seconds: int | None = Field(default=None, ge=0)
    max_wait_seconds: int | None = Field(default=None, ge=0)

    @field_validator("reasoning")
    @classmethod
    def _reasoning(cls, word: str) -> str:
        mode = word.strip().lower()
        why = reasoning_mode_problem(mode)
        if why is not None:
            raise ValueError(why)
        return mode

    @field_validator("thinking")
    @classmethod
    def _thinking(cls, word: str) -> str:
        level = normalize_thinking_level(word)
        if level is None:
            known = ", ".join(THINKING_LEVELS)
            raise ValueError(f"{word!r} is not a thinking level: one of {known}")
        return level

    def tool_rules(self) -> AgentTools:
        tools = self.tools or AgentTools()
        if self.tools_allow is None and not self.tools_deny:
            return tools
        return tools.model_copy(
            update={
                "allow": tools.allow if tools.allow is not None else self.tools_allow,
                "deny": [*tools.deny, *self.tools_deny],
            }
        )


class AgentlaneConfig(BaseModel):
    default_model: str = DEFAULT_MODEL_REF
    models: dict[str, ModelEntry] = Field(default_factory=dict)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    auth_profiles: dict[str, AuthProfile] = Field(default_factory=dict)
    auth_order: dict[str, list[str]] = Field(default_factory=dict)
    # `[auth.cooldowns]`: rotation caps, overload backoff and the cooldown ladders' bases.
    auth_cooldowns: AuthCooldowns = Field(default_factory=AuthCooldowns)
    # `[queue]` (SPEC §17.2 messages.queue.*) and `[loop_detection]` (SPEC §14).
    queue: QueueConfig = Field(default_factory=QueueConfig)
    loop_detection: LoopDetectionConfig = Field(default_factory=LoopDetectionConfig)
    # `[compaction]`: the summariser and the budgets of context compaction (issue 10).
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    # `[webhooks]`: which callback hosts inside the network are allowed (issue 19).
    webhooks: WebhookPolicy = Field(default_factory=WebhookPolicy)
    # `[tools]`: the tool policy (SPEC §13; issue 21).
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    # `[subagents]`: spawn depth, children, allowed agents and sub-agents' tools (SPEC §13.4).
    subagents: SubagentSettings = Field(default_factory=SubagentSettings)
    # `[tools.approval]`: the tools whose calls wait for a person's yes (issue 21).
    approval: ApprovalConfig = Field(default_factory=ApprovalConfig)

    def model(self, ref: str) -> ModelEntry:
        entry = self.models.get(ref)
        if entry is None:
            raise UnknownModelError(ref, sorted(self.models))
        return entry

    def agent(self, agent_id: str = "main") -> AgentConfig:
        """The agent, its model filled in (an agent that names none has the default model)."""
        agent = self.agents.get(agent_id)
        if agent is not None:
            return agent if agent.model else agent.model_copy(update={"model": self.default_model})
        if agent_id == "main":
            return AgentConfig(id="main", model=self.default_model)
        raise UnknownAgentError(f"unknown agent {agent_id!r}; known agents: {sorted(self.agents)}")

    def profiles_for(self, provider: str) -> list[AuthProfile]:
        """Profiles of `provider`: the configured order first, then the rest by id."""
        mine = {pid: p for pid, p in self.auth_profiles.items() if p.provider == provider}
        ordered = [mine[pid] for pid in self.auth_order.get(provider, []) if pid in mine]
        rest = [mine[pid] for pid in sorted(mine) if mine[pid] not in ordered]
        return ordered + rest

    def context_window(self, ref: str, agent_id: str | None = None) -> int:
        window = self.model(ref).context_window or DEFAULT_CONTEXT_WINDOW
        if agent_id is not None:
            cap = self.agent(agent_id).context_tokens
            if cap is not None and 0 < cap < window:
                return cap
        return window


TOP_LEVEL_KEYS = (
    "default_model",
    "models",
    "agents",
    "auth",
    "queue",
    "loop_detection",
    "compaction",
    "webhooks",
    "subagents",
    "tools",
)
AUTH_KEYS = ("profiles", "order", "cooldowns")
# `[tools]`: the tool policy's keys (agentlane/tool_policy_config.py) and `[tools.approval]`.
TOOLS_KEYS = ("approval", *ToolsConfig.model_fields)


def _known_keys() -> set[str]:
    """Every key the config file may hold, to suggest the one a typo meant."""
    names: set[str] = set(TOP_LEVEL_KEYS) | set(AUTH_KEYS) | set(TOOLS_KEYS)
    for model in (
        ModelEntry,
        ModelCapabilities,
        ModelPrices,
        AgentConfig,
        AuthProfile,
        AuthCooldowns,
        QueueConfig,
        LoopDetectionConfig,
        CompactionConfig,
        WebhookPolicy,
        ToolsConfig,
        AgentTools,
        ProviderTools,
        ChannelTools,
        GroupTools,
        ToolRules,
        SubagentSettings,
        SubagentTools,
    ):
        names |= set(model.model_fields)
    return names - {"id"}


def _meant(key: str, candidates: set[str] | tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# Settings whose models read a non-positive value as "the default" (SPEC: the original's
# semantics, kept for what sessions already carry); written in a config file, such a value is a
# mistake and refused.
POSITIVE_COOLDOWNS = (
    "billing_backoff_hours",
    "billing_max_hours",
    "auth_permanent_backoff_minutes",
    "auth_permanent_max_minutes",
    "failure_window_hours",
)
POSITIVE_LOOP_SETTINGS = (
    "history_size",
    "warning_threshold",
    "critical_threshold",
    "global_circuit_breaker_threshold",
)


def _require_positive(
    settings: BaseModel, names: tuple[str, ...], prefix: str, source: str
) -> None:
    for name in names:
        if name not in settings.model_fields_set:
            continue
        value = getattr(settings, name)
        if value <= 0:
            raise ConfigError(
                f"invalid configuration in {source}: {prefix}{name} must be greater than 0 "
                f"(got {value!r}); leave it out for the default"
            )
    by_provider = getattr(settings, "billing_backoff_hours_by_provider", None) or {}
    for provider, hours in by_provider.items():
        if hours <= 0:
            raise ConfigError(
                f"invalid configuration in {source}: {prefix}billing_backoff_hours_by_provider."
                f"{provider} must be greater than 0 (got {hours!r})"
            )


def _check_keys(
    table: Mapping[str, Any], allowed: tuple[str, ...], prefix: str, source: str
) -> None:
    unknown = [k for k in table if k not in allowed]
    if unknown:
        key = unknown[0]
        raise ConfigError(
            f"invalid configuration in {source}: unknown key {prefix}{key}{_meant(key, allowed)}; "
            f"known keys here: {', '.join(allowed)}"
        )


def _explain(err: ValidationError, where: str, source: str) -> str:
    """One line per problem: the key path in the file, what is wrong, and the key a typo meant."""
    lines = []
    for problem in err.errors():
        path = where + ".".join(str(p) for p in problem["loc"])
        if problem["type"] == "extra_forbidden":
            key = str(problem["loc"][-1])
            lines.append(f"unknown key {path}{_meant(key, _known_keys())}")
        elif problem["type"] == QUIET_ERROR:
            lines.append(f"{path}: {problem['msg']}")
        else:
            lines.append(f"{path}: {problem['msg']} (got {problem.get('input')!r})")
    return f"invalid configuration in {source}: " + "; ".join(lines)


def load_config(
    data_dir: Path | None = None,
    env: Mapping[str, str] | None = None,
    path: Path | None = None,
) -> AgentlaneConfig:
    """Catalogue + config file + environment. `path` overrides `AGENTLANE_CONFIG`."""
    env = os.environ if env is None else env
    file_path = path or _config_path(data_dir, env)
    raw = _read_file(file_path) if file_path is not None else {}
    return build_config(raw, env, source=str(file_path) if file_path else "<defaults>")


def build_config(
    raw: Mapping[str, Any], env: Mapping[str, str], *, source: str = "<config>"
) -> AgentlaneConfig:
    from agentlane.model_catalog import builtin_models

    _check_keys(raw, TOP_LEVEL_KEYS, "", source)
    _check_keys(dict(raw.get("auth") or {}), AUTH_KEYS, "auth.", source)
    _check_keys(dict(raw.get("tools") or {}), TOOLS_KEYS, "tools.", source)
    where = ""
    try:
        models = {m.ref: m for m in builtin_models()}
        for i, item in enumerate(_model_items(raw.get("models"))):
            where = f"models[{i}]."
            ref = f"{item.get('provider')}/{item.get('id')}"
            base = models[ref].model_dump() if ref in models else {}
            models[ref] = ModelEntry.model_validate(_merge(base, item))
        agents = {}
        for agent_id, spec in dict(raw.get("agents") or {}).items():
            where = f"agents.{agent_id}."
            agents[agent_id] = AgentConfig.model_validate({"id": agent_id, **dict(spec)})
        auth = dict(raw.get("auth") or {})
        profiles = {}
        for pid, spec in dict(auth.get("profiles") or {}).items():
            where = f'auth.profiles."{pid}".'
            profiles[pid] = AuthProfile.model_validate({"id": pid, **dict(spec)})
        where = "auth.order."
        order = {p: list(ids) for p, ids in dict(auth.get("order") or {}).items()}
        where = "auth.cooldowns."
        cooldowns = AuthCooldowns.model_validate(dict(auth.get("cooldowns") or {}))
        where = "queue."
        queue = QueueConfig.model_validate(dict(raw.get("queue") or {}))
        where = "loop_detection."
        loops = LoopDetectionConfig.model_validate(dict(raw.get("loop_detection") or {}))
        where = "compaction."
        compaction = CompactionConfig.model_validate(dict(raw.get("compaction") or {}))
        where = "webhooks."
        webhooks = WebhookPolicy.model_validate(dict(raw.get("webhooks") or {}))
        where = "subagents."
        subagents = SubagentSettings.model_validate(dict(raw.get("subagents") or {}))
        where = "tools."
        tools_table = dict(raw.get("tools") or {})
        tools = ToolsConfig.model_validate(
            {k: v for k, v in tools_table.items() if k != "approval"}
        )
        where = "tools.approval."
        approval = ApprovalConfig.model_validate(dict(tools_table.get("approval") or {}))
        _require_positive(cooldowns, POSITIVE_COOLDOWNS, "auth.cooldowns.", source)
        _require_positive(loops, POSITIVE_LOOP_SETTINGS, "loop_detection.", source)
    except ValidationError as err:
        raise ConfigError(_explain(err, where, source)) from err
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"invalid configuration in {source} at {where or 'top level'}: {err}"
        ) from err

    for provider, variable in ENV_KEY_VARIABLES.items():
        pid = f"{provider}:{ENV_PROFILE_SUFFIX}"
        if env.get(variable) and pid not in profiles:
            profiles[pid] = AuthProfile(id=pid, provider=provider, type="api_key", implied=True)

    default_model = env.get("AGENTLANE_MODEL") or str(raw.get("default_model") or DEFAULT_MODEL_REF)
    config = AgentlaneConfig(
        default_model=default_model,
        models=models,
        agents=agents,
        auth_profiles=profiles,
        auth_order=order,
        auth_cooldowns=cooldowns,
        queue=queue,
        loop_detection=loops,
        compaction=compaction,
        webhooks=webhooks,
        tools=tools,
        subagents=subagents,
        approval=approval,
    )
    model_source = "AGENTLANE_MODEL" if env.get("AGENTLANE_MODEL") else f"{source}: default_model"
    _check_refs(config, source, model_source)
    return config


_CONFIG_NAMES = ("config.toml", "config.json")


def _config_path(data_dir: Path | None, env: Mapping[str, str]) -> Path | None:
    explicit = env.get("AGENTLANE_CONFIG")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"AGENTLANE_CONFIG points to {path}, which is not a file")
        return path
    found = _config_in_data_dir(data_dir, env)
    return Path(found[0]) if found else None


def _config_in_data_dir(
    data_dir: Path | None, env: Mapping[str, str]
) -> tuple[str, os.stat_result] | None:
    """The data folder's config file and its stat: plain strings and one `stat` a name, as
    `ConfigWatcher` asks before every model call."""
    folder = (
        str(data_dir)
        if data_dir is not None
        else env.get("AGENTLANE_DATA_DIR", os.path.join(os.getcwd(), "data"))
    )
    for name in _CONFIG_NAMES:
        candidate = os.path.join(folder, name)
        try:
            found = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(found.st_mode):
            return candidate, found
    return None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        if path.suffix == ".json":
            data = json.loads(path.read_text(encoding="utf-8"))
        else:
            with path.open("rb") as handle:
                data = tomllib.load(handle)
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a table/object at the top")
    return data


def _model_items(models: Any) -> list[dict[str, Any]]:
    """`[[models]]` as a list, or `[models."provider/id"]` tables keyed by reference."""
    if models is None:
        return []
    if isinstance(models, list):
        return [dict(m) for m in models]
    if isinstance(models, dict):
        items = []
        for ref, spec in models.items():
            provider, _, model_id = str(ref).partition("/")
            items.append({"provider": provider, "id": model_id, **dict(spec)})
        return items
    raise TypeError("models must be a list of tables or a table keyed by provider/model")


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _check_refs(config: AgentlaneConfig, source: str = "<config>", model_source: str = "") -> None:
    """Every model named exists; an error names the file and key that named it."""
    refs = [(model_source or f"{source}: default_model", config.default_model)]
    for agent_id, agent in config.agents.items():
        if agent.model:
            refs.append((f"{source}: agents.{agent_id}.model", agent.model))
        refs += [
            (f"{source}: agents.{agent_id}.fallbacks[{i}]", ref)
            for i, ref in enumerate(agent.fallbacks)
        ]
    for where, ref in refs:
        try:
            config.model(ref)
        except UnknownModelError as err:
            raise UnknownModelError(ref, err.known, where) from None


class ConfigWatcher:
    """The configuration, re-read when its file changes (a model or profile added while workers
    run is usable without a restart). A file that becomes invalid (a half-saved edit, a typo)
    leaves the last good configuration in use, with one warning in the log per change, so
    running sessions are not failed by an edit in progress; `agentlane config check` names the
    error. A file invalid from the start is an error: nothing silently runs on defaults."""

    def __init__(self, data_dir: Path | None = None, env: Mapping[str, str] | None = None):
        self.data_dir = data_dir
        self.env = env
        self._stamp: tuple[str, int] | None = None
        self._config: AgentlaneConfig | None = None
        # The stamp of the file while it is invalid (the last good config answers meanwhile).
        self._broken: tuple[str, int] | None = None

    def _current_stamp(self) -> tuple[str, int]:
        """Which file holds the configuration and when it changed (asked before every model
        call)."""
        env = os.environ if self.env is None else self.env
        if env.get("AGENTLANE_CONFIG"):
            path = str(_config_path(self.data_dir, env))  # not a file: raises
            try:
                return (path, os.stat(path).st_mtime_ns)
            except OSError:
                return (path, -1)
        found = _config_in_data_dir(self.data_dir, env)
        return (found[0], found[1].st_mtime_ns) if found else ("", 0)

    def where(self) -> str:
        """The file this configuration is read from, or that none is (built-in defaults)."""
        try:
            path = self._current_stamp()[0]
        except ConfigError:
            path = ""
        return path or f"no config file (none in {self.data_dir})"

    def current(self, strict: bool = False) -> AgentlaneConfig:
        """The configuration in force. `strict`: raise while the file is invalid rather than
        answer with the last good one (the tool policy, a security control, fails closed: an
        edit meant to deny a tool must not leave an older, wider policy in force)."""
        stamp = self._current_stamp()
        if self._config is None or stamp != self._stamp or (strict and self._broken):
            try:
                self._config = load_config(self.data_dir, self.env)
                self._broken = None
            except ConfigError as err:
                if self._config is None or strict:
                    raise
                if self._broken != stamp:  # said once per change of the file
                    _log.warning("%s; the previous configuration stays in use", err)
                self._broken = stamp
                self._stamp = stamp
                return self._config
            self._stamp = stamp
        return self._config
