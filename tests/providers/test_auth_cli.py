"""`agentlane auth set/list` with gateway settings: key and header values from stdin or argv
into the store; `list` shows the style and header names, never a value."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from activities.auth_store import AuthStore
from store.interface import Store
from tests.harness import REPO

KEY = "sk-cli-key-0123456789"
HEADER_SECRET = "cf-cli-token-9876543210"


def agentlane(data_dir: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTLANE_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)}
    env.pop("AGENTLANE_CONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "clients.cli", *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_set_with_style_and_headers_then_list_shows_no_values(tmp_path: Path) -> None:
    done = agentlane(
        tmp_path,
        "auth",
        "set",
        "gw:cf",
        "--provider",
        "anthropic",
        "--auth-header",
        "bearer",
        "--header",
        "X-Org=team-a",
        "--header",
        "cf-aig-authorization",
        stdin=f"{KEY}\nBearer {HEADER_SECRET}\n",
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "agentlane.db").stat().st_mode) == 0o600
    profile = AuthStore.for_data_dir(tmp_path, {}).profiles()["gw:cf"]
    assert (profile.provider, profile.type, profile.key, profile.auth_header) == (
        "anthropic",
        "api_key",
        KEY,
        "bearer",
    )
    assert dict(profile.headers) == {
        "X-Org": "team-a",
        "cf-aig-authorization": f"Bearer {HEADER_SECRET}",
    }
    for text in (done.stdout, done.stderr):
        assert KEY not in text and HEADER_SECRET not in text

    listed = agentlane(tmp_path, "auth", "list")
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("gw:cf\t"))
    assert "auth bearer" in line and "headers X-Org,cf-aig-authorization" in line
    assert KEY not in listed.stdout and HEADER_SECRET not in listed.stdout
    assert "team-a" not in listed.stdout


def test_a_plain_profile_still_works_and_lists_the_default_style(tmp_path: Path) -> None:
    done = agentlane(
        tmp_path, "auth", "set", "anthropic:work", "--provider", "anthropic", stdin=KEY
    )
    assert done.returncode == 0, done.stderr
    profile = AuthStore.for_data_dir(tmp_path, {}).profiles()["anthropic:work"]
    assert (profile.provider, profile.type, profile.key) == ("anthropic", "api_key", KEY)
    assert (profile.auth_header, dict(profile.headers)) == (None, {})
    listed = agentlane(tmp_path, "auth", "list")
    assert "auth default\theaders -" in listed.stdout


def test_a_bad_header_or_a_missing_value_stores_nothing(tmp_path: Path) -> None:
    bad = agentlane(
        tmp_path, "auth", "set", "gw:x", "--provider", "openai", "--header", "X Org=a", stdin=KEY
    )
    assert bad.returncode == 2 and "'X Org'" in bad.stderr and "nothing stored" in bad.stderr
    # `--header NAME` with no line left on stdin for its value.
    missing = agentlane(
        tmp_path, "auth", "set", "gw:x", "--provider", "openai", "--header", "X-Token", stdin=KEY
    )
    assert missing.returncode == 2 and "'X-Token' has an empty value" in missing.stderr
    assert AuthStore.for_data_dir(tmp_path, {}).profiles() == {}


def test_list_shows_each_profiles_cooldown_from_the_shared_state(tmp_path: Path) -> None:
    """The failover messages send users to `agentlane auth list`: it says which profile is
    cooling or disabled, why, and for how long."""
    import time

    for pid in ("anthropic:a", "anthropic:b", "anthropic:c"):
        done = agentlane(tmp_path, "auth", "set", pid, "--provider", "anthropic", stdin=KEY)
        assert done.returncode == 0, done.stderr
    now = time.time()
    state = {
        "usage": {
            "anthropic:a": {
                "cooldown_until": now + 25,
                "cooldown_reason": "rate_limit",
                "cooldown_model": "claude-x",
            },
            "anthropic:b": {"disabled_until": now + 5 * 3600 - 30, "disabled_reason": "billing"},
            "anthropic:c": {"cooldown_until": now - 5, "cooldown_reason": "auth"},
        }
    }
    from agentlane.settings import Settings
    from store.sync import run_sync

    async def write(store: Store) -> None:
        for pid, usage in state["usage"].items():
            await store.set_usage(pid, None, json.dumps(usage))

    run_sync(Settings(data_dir=tmp_path), write)
    listed = agentlane(tmp_path, "auth", "list")
    assert listed.returncode == 0, listed.stderr
    rows = {line.split("\t")[0]: line.split("\t")[-1] for line in listed.stdout.splitlines()}
    assert (
        rows["anthropic:a"].startswith("cooling 2")
        and "for claude-x (rate_limit)" in rows["anthropic:a"]
    )
    assert rows["anthropic:b"] == "disabled 4 h 59 min (billing)"
    assert rows["anthropic:c"] == "ready", "an ended window is ready"
