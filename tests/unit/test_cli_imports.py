"""The CLI starts in a blink (issue 22): building its parser and `agentlane --help` import only
light modules. The SDKs, pydantic contracts, activities and workflows are imported by the
commands that use them, inside the command functions."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.import_probe import REPO_ROOT

# Each of these costs 0.1-0.4 s of start-up; none is needed to parse arguments or print help.
FORBIDDEN = (
    "temporalio",
    "openai",
    "anthropic",
    "fastapi",
    "opentelemetry",
    "pydantic",
    "activities",
    "workflows",
    "clients.api",
)


def _forbidden(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_building_the_parser_imports_no_sdk() -> None:
    probe = (
        "import sys, clients.cli\n"
        "parser = clients.cli.build_parser()\n"
        "for argv in (['--help'], ['status', '--help'], ['send', '--help']):\n"
        "    try:\n"
        "        parser.parse_args(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('MODULES', ','.join(sys.modules), file=sys.stderr)\n"
    )
    result = _run(["-c", probe])
    assert result.returncode == 0, result.stderr
    assert "usage: agentlane status" in result.stdout
    modules = result.stderr.split("MODULES ", 1)[1].strip().split(",")
    assert "clients.cli" in modules
    assert _forbidden(modules) == [], "move these imports into the command functions"


def test_help_through_main_imports_no_sdk() -> None:
    """`agentlane --help` as a user runs it (through `main`, which catches the client's errors),
    every import listed by `-X importtime`."""
    result = _run(["-X", "importtime", "-m", "clients.cli", "--help"])
    assert result.returncode == 0, result.stderr
    assert "usage:" in result.stdout
    modules = [
        line.rsplit("|", 1)[1].strip()
        for line in result.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert "agentlane.ids" in modules  # the probe sees the CLI's imports
    assert _forbidden(modules) == [], "move these imports into the command functions"
