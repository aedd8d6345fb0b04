"""`agentlane auth clear` (and `auth set` of a new key) forgets a profile's cooldown and billing
disable: after paying the bill, nothing else brought a disabled profile back for hours."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

from activities.profile_listing import clear_health
from agentlane.errors import FailoverReason
from agentlane.profile_state import ProfileUsage
from agentlane.settings import Settings
from store.open import open_store
from tests.harness import REPO


async def test_a_disabled_profile_is_cleared_and_its_last_use_kept(tmp_path: Path) -> None:
    store = await open_store(Settings(data_dir=tmp_path))
    try:
        disabled = ProfileUsage(
            last_used=100.0,
            disabled_until=time.time() + 5 * 3600,
            disabled_reason=FailoverReason.BILLING,
            error_count=3,
        )
        assert await store.set_usage("anthropic:work", None, disabled.model_dump_json())
        assert await clear_health(store, "anthropic:work")
        row = await store.usage_row("anthropic:work")
        assert row is not None
        assert ProfileUsage.model_validate_json(row.usage) == ProfileUsage(last_used=100.0)
        assert not await clear_health(store, "anthropic:work")  # nothing left to forget
        assert not await clear_health(store, "never:seen")
    finally:
        await store.close()


async def test_the_cli_says_what_it_cleared(tmp_path: Path) -> None:
    store = await open_store(Settings(data_dir=tmp_path))
    try:
        cooling = ProfileUsage(
            cooldown_until=time.time() + 600, cooldown_reason=FailoverReason.RATE_LIMIT
        )
        assert await store.set_usage("openai:main", None, cooling.model_dump_json())
    finally:
        await store.close()
    env = {"AGENTLANE_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    out = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "clients.cli", "auth", "clear", "openai:main"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "cleared the cooldown of openai:main: runs use it again" in out.stdout


async def test_a_stored_profile_the_config_leaves_out_is_said_to_be_unused(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[auth.profiles."fchat:main"]\nprovider = "fchat"\n')
    env = {"AGENTLANE_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}

    def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "clients.cli", "auth", *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    stored = await asyncio.to_thread(
        cli, "set", "fchat:store", "--provider", "fchat", stdin="k-1\n"
    )
    assert stored.returncode == 0, stored.stderr
    assert "warning: runs will not use fchat:store: the config declares fchat:main" in stored.stderr
    listed = await asyncio.to_thread(cli, "list")
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("fchat:store"))
    assert line.endswith("not used (the config declares fchat:main for fchat)"), line
