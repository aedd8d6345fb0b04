"""Issue 19: values a config file must not hold are errors naming the file and the key (the
models read a non-positive threshold as "default", a mistake the file's author would never see),
and `agentlane config check` says so with a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentlane.config import ConfigError, UnknownModelError, load_config
from tests.harness import REPO


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[loop_detection]\nwarning_threshold = -1\n", ["loop_detection.warning_threshold", "-1"]),
        ("[loop_detection]\ncritical_threshold = 0\n", ["loop_detection.critical_threshold"]),
        ("[loop_detection]\nhistory_size = 0\n", ["loop_detection.history_size"]),
        (
            "[auth.cooldowns]\nfailure_window_hours = -24\n",
            ["auth.cooldowns.failure_window_hours", "greater than 0", "-24"],
        ),
        (
            "[auth.cooldowns]\nbilling_backoff_hours_by_provider = {openai = 0}\n",
            ["auth.cooldowns.billing_backoff_hours_by_provider.openai"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\nbase_url='not a url'\n",
            ["models[0].base_url", "'not a url' is not a URL"],
        ),
        (
            "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\nbase_url='localhost:8000'\n",
            ["models[0].base_url"],
        ),
        ("default_model = 'nope/none'\n", ["default_model", "unknown model 'nope/none'"]),
        ("[agents.main]\nmodel = 'nope/none'\n", ["agents.main.model", "'nope/none'"]),
        (
            "[agents.main]\nmodel = 'offline/planner'\nfallbacks = ['offline/planner', 'no/pe']\n",
            ["agents.main.fallbacks[1]", "'no/pe'"],
        ),
    ],
)
def test_bad_values_name_file_and_key(tmp_path: Path, text: str, words: list[str]) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_config(path=path, env={})
    message = str(caught.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, message


def test_good_values_and_the_environment_model_are_named_too(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "[loop_detection]\nwarning_threshold = 3\ncritical_threshold = 6\n"
        "[auth.cooldowns]\nfailure_window_hours = 12\n"
        "[[models]]\nprovider='x'\nid='y'\napi='openai-compatible'\n"
        "base_url='http://127.0.0.1:11434/v1'\n",
    )
    config = load_config(path=path, env={})
    assert config.loop_detection.warning_threshold == 3
    with pytest.raises(UnknownModelError, match="AGENTLANE_MODEL: unknown model 'zz/top'"):
        load_config(path=path, env={"AGENTLANE_MODEL": "zz/top"})


def config_check(data_dir: Path, text: str) -> subprocess.CompletedProcess[str]:
    """`agentlane config check` of `text` as the data dir's config file."""
    env = {**os.environ, "AGENTLANE_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    env.pop("AGENTLANE_CONFIG", None)
    env.pop("AGENTLANE_MODEL", None)
    write(data_dir, text)
    return subprocess.run(
        [sys.executable, "-m", "clients.cli", "config", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_config_check_refuses_them(tmp_path: Path) -> None:
    bad = config_check(tmp_path, "[loop_detection]\nwarning_threshold = -1\n")
    assert bad.returncode != 0
    assert "loop_detection.warning_threshold" in bad.stderr and str(tmp_path) in bad.stderr


def test_config_check_lists_only_real_chains(tmp_path: Path) -> None:
    """Review T F-b: with an `[agents.main]` table and no fallbacks, every catalogue model was
    printed under "model chains", reading as one long fallback chain."""

    def check(text: str) -> str:
        done = config_check(tmp_path, text)
        assert done.returncode == 0, done.stderr
        return done.stdout

    alone = check("[agents.main]\nmax_wait_seconds = 20\n")
    assert "agent main: no fallbacks: each session stays on its own model" in alone, alone
    assert "offline/planner\n" not in alone
    chained = check(
        '[agents.main]\nmodel = "offline/planner"\nfallbacks = ["anthropic/claude-haiku-4-5"]\n'
    )
    assert "offline/planner → anthropic/claude-haiku-4-5" in chained, chained
