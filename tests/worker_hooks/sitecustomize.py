"""Test-only hooks for worker processes, kept out of production code: a test puts this folder
first on a worker's PYTHONPATH, and Python imports `sitecustomize` as the worker starts.

TEST_HOOK_CRASH_IN_APPLY_PATCH=<marker file>: the first worker that writes a file of an
apply_patch dies right after that write (exit status 137, no clean-up: as with kill -9), the
worst moment for a crash, so the retried attempt can be shown to finish the patch rather than
apply it again. The marker file, made just before dying, spares every later write (the retry's
included).
"""

from __future__ import annotations

import os
from pathlib import Path

_marker = os.environ.get("TEST_HOOK_CRASH_IN_APPLY_PATCH")

if _marker:
    from activities.tools import apply_patch as _apply_patch

    _write = _apply_patch._write

    def _write_then_die(path: Path, content: str) -> None:
        _write(path, content)
        if not os.path.exists(_marker):
            Path(_marker).touch()
            os._exit(137)

    _apply_patch._write = _write_then_die
