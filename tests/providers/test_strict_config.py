"""Strict configuration: unknown keys and impossible values are errors that name the file, the
key path and, when close, the key that was meant; `agentlane config check` reports them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentlane.config import ConfigError, load_config
from tests.harness import REPO


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("defualt_model = 'offline/planner'\n", ["unknown key defualt_model", "'default_model'"]),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\ncontext_window=-5\n",
            ["models[0].context_window", "greater than 0", "-5"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\nmax_output_tokens=0\n",
            ["models[0].max_output_tokens"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\ncontext_windw=1000\n",
            ["unknown key models[0].context_windw", "'context_window'"],
        ),
        ("[queue]\ncap = 0\n", ["queue.cap"]),
        ("[queue]\nmdoe = 'collect'\n", ["unknown key queue.mdoe", "'mode'"]),
        (
            "[agents.main]\nmodel='offline/planner'\ncontext_tokens=-1\n",
            ["agents.main.context_tokens"],
        ),
        ("[auth]\nprofile = {}\n", ["unknown key auth.profile", "'profiles'"]),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\n"
            "headers = {'X Org' = 'team-a'}\n",
            ["models[0].headers", "header name 'X Org' is not valid"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='anthropic'\nauth_header='Bearer'\n",
            ["models[0].auth_header", "'x-api-key', 'bearer' or 'none'"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='anthropic'\nheader={}\n",
            ["unknown key models[0].header", "'headers'"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='anthropic'\n"
            "headers = {'X-Token' = 'env:NOT-A-NAME'}\n",
            ["models[0].headers", "'X-Token'", "does not name an environment variable"],
        ),
    ],
)
def test_bad_config_names_file_key_and_meaning(tmp_path: Path, text: str, words: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path=path, env={})
    message = str(caught.value)
    assert str(path) in message
    for word in words:
        assert word in message, message


def test_a_bad_header_value_is_named_not_quoted(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\n"
        'headers = {"X-Org" = "team-a", "X-Team" = "red\\r\\nX-Injected: 1"}\n',
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path=path, env={})
    message = str(caught.value)
    assert str(path) in message and "models[0].headers" in message and "'X-Team'" in message
    assert "line break" in message
    assert "X-Injected" not in message and "team-a" not in message


def test_config_check_command(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTLANE_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("AGENTLANE_CONFIG", None)
    ok = subprocess.run(
        [sys.executable, "-m", "clients.cli", "config", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and "configuration ok" in ok.stdout, ok.stderr
    write(
        tmp_path, "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\ncontext_window=-1\n"
    )
    bad = subprocess.run(
        [sys.executable, "-m", "clients.cli", "config", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2
    assert "models[0].context_window" in bad.stderr


def test_the_config_is_read_again_when_its_file_changes(tmp_path: Path) -> None:
    import time

    from agentlane.config import ConfigWatcher

    path = write(tmp_path, "default_model = 'offline/planner'\n")
    watcher = ConfigWatcher(tmp_path, env={})
    assert "late/added" not in watcher.current().models
    same = watcher.current()
    assert watcher.current() is same  # unchanged file: not parsed again
    time.sleep(0.01)
    path.write_text(
        "[[models]]\nprovider='late'\nid='added'\napi='openai-compatible'\n"
        "base_url='http://127.0.0.1:9/v1'\n"
    )
    assert "late/added" in watcher.current().models
    # A half-saved edit: the last good configuration stays in use (running sessions are not
    # failed by it); a watcher that never read a good one says what is wrong.
    time.sleep(0.01)
    path.write_text("[[models]]\nprovider='late'\n")
    assert "late/added" in watcher.current().models
    with pytest.raises(ConfigError, match="models\\[0\\]"):
        ConfigWatcher(tmp_path, env={}).current()
    # The tool policy fails closed: not an older, wider policy while the file is broken.
    with pytest.raises(ConfigError, match="models\\[0\\]"):
        watcher.current(strict=True)
    time.sleep(0.01)
    path.write_text("default_model = 'offline/planner'\n")
    assert "late/added" not in watcher.current().models


def test_config_check_prints_each_models_chain(tmp_path: Path) -> None:
    """Writing `[agents.main]` appends its model to the chain of every session of the agent
    (SPEC §8.1): `config check` shows it, model by model."""
    env = {**os.environ, "AGENTLANE_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("AGENTLANE_CONFIG", None)
    env.pop("AGENTLANE_MODEL", None)
    write(
        tmp_path,
        "[[models]]\nprovider='nov1'\nid='gpt-m'\napi='openai-compatible'\n"
        "base_url='http://localhost:1'\n\n"
        "[[models]]\nprovider='mock-ant'\nid='claude-m'\napi='anthropic'\n"
        "base_url='http://localhost:2'\n\n"
        "[agents.main]\nmodel='mock-ant/claude-m'\nfallbacks=['openai/gpt-4.1']\n",
    )
    ok = subprocess.run(
        [sys.executable, "-m", "clients.cli", "config", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    lines = [line.strip() for line in ok.stdout.splitlines()]
    assert "agent main:" in lines
    assert "mock-ant/claude-m → openai/gpt-4.1" in lines
    assert "nov1/gpt-m → mock-ant/claude-m" in lines
    assert "offline/planner → mock-ant/claude-m" in lines


def test_config_check_warns_of_a_window_the_guard_refuses(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTLANE_DATA_DIR": str(tmp_path), "PYTHONPATH": str(REPO)}
    env.pop("AGENTLANE_CONFIG", None)
    write(
        tmp_path,
        "[[models]]\nprovider='ollama'\nid='tiny'\napi='openai-compatible'\n"
        "base_url='http://localhost:2/v1'\ncontext_window=8000\n\n"
        "[[models]]\nprovider='ollama'\nid='small'\napi='openai-compatible'\n"
        "base_url='http://localhost:2/v1'\ncontext_window=20000\n",
    )
    ok = subprocess.run(
        [sys.executable, "-m", "clients.cli", "config", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    assert "ollama/tiny has a context window of 8000 tokens, under the minimum of 16000" in (
        ok.stderr
    )
    assert "ollama/small has a context window of 20000 tokens, under 32000" in ok.stderr
    assert "offline/planner" not in ok.stderr
