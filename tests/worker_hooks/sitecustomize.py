"""Test-only hooks for worker processes, kept out of production code: a test puts this folder
first on a worker's PYTHONPATH, and Python imports `sitecustomize` as the worker starts.

TEST_HOOK_CRASH_IN_APPLY_PATCH=<marker file>: the first worker that writes a file of an
apply_patch dies right after that write (exit status 137, no clean-up: as with kill -9), the
worst moment for a crash, so the retried attempt can be shown to finish the patch rather than
apply it again. The marker file, made just before dying, spares every later write (the retry's
included).

TEST_HOOK_STREAM_READS=<file>: each time a run's end reads the run's events back from the stream
(`published_so_far`, `run_event_ids` in `activities/run_finish.py`) a line naming the read is
appended to the file, so a test can tell a clean run's end reads nothing back.
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

_reads = os.environ.get("TEST_HOOK_STREAM_READS")

if _reads:
    from typing import Any

    from activities import run_finish as _run_finish

    def _note(name: str) -> None:
        with open(_reads, "a") as fh:  # a line, from a test's worker: no need to leave the loop
            fh.write(f"{name}\n")

    def _counted(name: str, read: Any) -> Any:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            _note(name)
            return await read(*args, **kwargs)

        return counted

    _run_finish.published_so_far = _counted("published_so_far", _run_finish.published_so_far)
    _run_finish.run_event_ids = _counted("run_event_ids", _run_finish.run_event_ids)
