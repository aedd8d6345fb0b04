"""Workflow code makes no non-deterministic call (issue 26).

Workers run workflows without the SDK's sandbox (workers/sandbox.py), so nothing refuses
`time.time()` or `random` called from workflow code at run time; the strict replay of the
recorded histories catches such a call only on the paths those histories took.
This check reads every module under `workflows/` for what the sandbox would have refused:
importing a clock, randomness, I/O or threads, or asking `datetime` for the time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
# The workflow API has its own replay-safe versions: workflow.now(), workflow.random(),
# workflow.uuid4(), workflow.sleep().
FORBIDDEN_MODULES = {
    "time",
    "random",
    "uuid",
    "secrets",
    "os",
    "socket",
    "subprocess",
    "threading",
    "httpx",
    "requests",
    "urllib",
    "activities",
}
FORBIDDEN_CALLS = {"now", "utcnow", "today", "fromtimestamp"}  # on datetime / date


def offences(source: str) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            names = []
        for name in names:
            if name.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: imports {name}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in FORBIDDEN_CALLS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in {"datetime", "date"}
        ):
            found.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}()")
    return found


@pytest.mark.parametrize(
    "path", sorted(WORKFLOWS.rglob("*.py")), ids=lambda p: str(p.relative_to(WORKFLOWS))
)
def test_workflow_module_makes_no_non_deterministic_call(path: Path) -> None:
    assert offences(path.read_text()) == []


def test_the_check_sees_what_the_sandbox_would_refuse() -> None:
    bad = (
        "import time\nfrom random import choice\nimport os.path\n"
        "from datetime import datetime\nx = datetime.now()\n"
    )
    assert offences(bad) == [
        "line 1: imports time",
        "line 2: imports random",
        "line 3: imports os.path",
        "line 5: datetime.now()",
    ]
    assert offences("from temporalio import workflow\nt = workflow.now()\n") == []
