"""What the CLI says without a reachable server: a line naming the address and what to do, and
a schedule's bad timing refused before any connection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.harness import REPO, devserver


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AGENTLANE_TEMPORAL_ADDRESS": f"127.0.0.1:{devserver.free_port()}",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "clients.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_unreachable_server_is_named_with_what_to_do() -> None:
    got = cli("status", "alice")
    assert got.returncode == 7, got.stderr
    assert "cannot reach the Temporal server at 127.0.0.1:" in got.stderr
    assert "agentlane server start" in got.stderr and "Traceback" not in got.stderr


def test_a_bad_schedule_timing_is_refused_before_connecting() -> None:
    got = cli("schedule", "create", "x", "--session", "s", "--message", "hi", "--every", "1wk")
    assert got.returncode == 2, got.stderr
    assert "invalid interval '1wk'" in got.stderr and "reach" not in got.stderr


def test_a_message_file_that_cannot_be_read_is_rejected_input_not_an_unreachable_server(
    tmp_path: Path,
) -> None:
    # Exit codes are what scripts branch on: 7 would send an operator looking for a dead server.
    for path, why in ((tmp_path / "missing.md", "No such file"), (tmp_path, "Is a directory")):
        got = cli("send", "alice", "--file", str(path))
        assert got.returncode == 2, got.stderr
        assert "cannot read the message file" in got.stderr and why in got.stderr
        assert "reach" not in got.stderr and "Traceback" not in got.stderr


def test_a_bad_callback_url_is_one_line_of_rejected_input_before_connecting() -> None:
    got = cli("send", "alice", "hi", "--callback-url", "http://x:99999/")
    assert got.returncode == 2, got.stderr
    assert got.stderr.strip() == (
        "rejected: callback_url: Value error, callback URL 'http://x:99999/' is not a valid URL: "
        "Port out of range 0-65535"
    ), got.stderr


def test_setup_namespace_names_the_address_it_was_given() -> None:
    given = f"127.0.0.1:{devserver.free_port()}"
    got = cli("setup-namespace", "--address", given)
    assert got.returncode == 7, got.stderr
    assert f"cannot reach the Temporal server at {given}:" in got.stderr


def test_a_closed_stdout_pipe_is_not_an_unreachable_server() -> None:
    # As `agentlane ... | head` when head has gone: the reading end is closed before the write.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        got = subprocess.run(
            [sys.executable, "-m", "clients.cli", "setup-namespace", "--print"],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert got.returncode == 141, got.stderr  # 128 + SIGPIPE, as a shell reports it
    assert got.stderr == ""


def test_a_negative_interval_reaches_its_own_check() -> None:
    # argparse reads "-5m" as an option and says only "expected one argument".
    got = cli("schedule", "create", "x", "--session", "s", "--message", "hi", "--every", "-5m")
    assert got.returncode == 2, got.stderr
    assert "invalid interval '-5m'" in got.stderr and "expected one argument" not in got.stderr
    late = cli(
        "schedule",
        "create",
        "x",
        "--session",
        "s",
        "--message",
        "hi",
        "--every",
        "5m",
        "--catchup-window",
        "-1h",
    )
    assert late.returncode == 2, late.stderr
    assert "'-1h'" in late.stderr and "expected one argument" not in late.stderr
