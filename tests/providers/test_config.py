"""Model registry, agents and auth profiles from catalogue + file + environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlane.config import (
    ApiKind,
    ConfigError,
    UnknownModelError,
    build_config,
    load_config,
)

TOML = """
default_model = "anthropic/claude-haiku-4-5"

[[models]]
provider = "ollama"
id = "qwen3:8b"
api = "openai-compatible"
base_url = "http://127.0.0.1:11434/v1"
context_window = 40960
capabilities = { thinking_levels = ["off", "low", "high"] }

[[models]]
provider = "anthropic"
id = "claude-haiku-4-5"
context_window = 100000

[agents.main]
model = "anthropic/claude-haiku-4-5"
fallbacks = ["openai/gpt-4.1", "ollama/qwen3:8b"]
thinking = "low"
context_tokens = 50000
tools_deny = ["exec"]

[auth.profiles."anthropic:work"]
provider = "anthropic"
type = "api_key"

[auth.order]
anthropic = ["anthropic:work", "anthropic:env"]
"""


def test_builtin_catalogue_without_any_file(tmp_path: Path) -> None:
    config = load_config(data_dir=tmp_path, env={})
    assert config.default_model == "offline/planner"
    planner = config.model("offline/planner")
    assert (planner.api, planner.context_window, planner.needs_key) == (
        ApiKind.OFFLINE,
        200_000,
        False,
    )
    sonnet = config.model("anthropic/claude-sonnet-4-5")
    assert sonnet.api == ApiKind.ANTHROPIC and sonnet.needs_key
    assert sonnet.prices.input == 3.0 and sonnet.prices.cache_read == 0.3
    for ref in ("openai/gpt-4.1", "openai/gpt-4o", "openai/o3", "openai/gpt-5"):
        assert config.model(ref).context_window >= 128_000
    assert "off" not in config.model("openai/o3").capabilities.thinking_levels
    assert config.model("openai/gpt-5").capabilities.strict_tools
    assert config.auth_profiles == {}


def test_toml_file_in_data_dir_merges_over_catalogue(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(TOML)
    config = load_config(data_dir=tmp_path, env={})
    assert config.default_model == "anthropic/claude-haiku-4-5"
    haiku = config.model("anthropic/claude-haiku-4-5")
    assert haiku.context_window == 100_000 and haiku.max_output_tokens == 64_000  # merged
    local = config.model("ollama/qwen3:8b")
    assert local.api == ApiKind.OPENAI_COMPATIBLE and not local.needs_key
    assert local.capabilities.thinking_levels == ["off", "low", "high"]
    agent = config.agent("main")
    assert agent.fallbacks == ["openai/gpt-4.1", "ollama/qwen3:8b"] and agent.tools_deny == ["exec"]
    assert config.context_window("anthropic/claude-haiku-4-5", "main") == 50_000
    assert config.context_window("anthropic/claude-haiku-4-5") == 100_000
    assert config.auth_order == {"anthropic": ["anthropic:work", "anthropic:env"]}
    assert config.auth_profiles["anthropic:work"].type == "api_key"


def test_env_keys_imply_profiles_and_env_picks_model(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(TOML)
    env = {
        "ANTHROPIC_API_KEY": "sk-ant-secret",
        "OPENAI_API_KEY": "sk-openai-secret",
        "AGENTLANE_MODEL": "openai/gpt-5",
    }
    config = load_config(data_dir=tmp_path, env=env)
    assert config.default_model == "openai/gpt-5"
    assert [p.id for p in config.profiles_for("anthropic")] == ["anthropic:work", "anthropic:env"]
    assert [p.id for p in config.profiles_for("openai")] == ["openai:env"]
    # Keys are not configuration.
    assert "secret" not in config.model_dump_json()


def test_agentlane_config_env_points_to_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "elsewhere.json"
    path.write_text(
        json.dumps(
            {
                "default_model": "vllm/llama",
                "models": {
                    "vllm/llama": {"api": "openai-compatible", "base_url": "http://h:8000/v1"}
                },
            }
        )
    )
    config = load_config(data_dir=tmp_path, env={"AGENTLANE_CONFIG": str(path)})
    assert config.model("vllm/llama").base_url == "http://h:8000/v1"
    with pytest.raises(ConfigError, match="not a file"):
        load_config(env={"AGENTLANE_CONFIG": str(tmp_path / "missing.toml")})


def test_unknown_model_lists_known_ids() -> None:
    config = build_config({}, {})
    with pytest.raises(UnknownModelError) as caught:
        config.model("anthropic/claude-nonexistent")
    message = str(caught.value)
    assert "anthropic/claude-nonexistent" in message and "offline/planner" in message
    assert "openai/gpt-4.1" in caught.value.known
    with pytest.raises(UnknownModelError):
        build_config({}, {"AGENTLANE_MODEL": "nope/none"})
    with pytest.raises(UnknownModelError):
        build_config({"agents": {"main": {"model": "offline/planner", "fallbacks": ["x/y"]}}}, {})


def test_invalid_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("models = [ { provider = 'x', id = 'y', api = 'nope' } ]")
    with pytest.raises(ConfigError, match="invalid configuration"):
        load_config(data_dir=tmp_path, env={})
    (tmp_path / "config.toml").write_text("this is = = not toml")
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(data_dir=tmp_path, env={})
