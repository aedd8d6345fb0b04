"""Which modules importing a module drags in, measured in a fresh interpreter (workflow code must
not pull in activity code or I/O libraries)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def imported_with(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """Modules whose name starts with one of `prefixes`, loaded by importing `modules`."""
    probe = (
        f"import sys, {', '.join(modules)};"
        f"print(','.join(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    return [m for m in result.stdout.strip().split(",") if m]
