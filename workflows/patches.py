"""Patch markers: one per workflow run where there used to be one per patch.

Every change to a workflow's command sequence since the first recorded histories sits behind a
`workflow.patched(...)` check, and each check a workflow reaches writes its own marker: three or
four `core_patch` rows on every run's and every session's page in the UI, saying nothing to an
operator. A workflow recorded since this change writes one marker, its `*_CODE_PATCH`, first,
and every other check (`patches(X)`) then answers yes without a marker of its own. A history
without that marker (recorded before, or a workflow in flight when the worker was upgraded)
asks each patch as before, so it replays, and goes on, exactly as it did.
"""

from __future__ import annotations

from temporalio import workflow

# The one marker of runs recorded since: every patch of the run is in force.
RUN_CODE_PATCH = "run-code-2026-11"
# The same for sessions.
SESSION_CODE_PATCH = "session-code-2026-11"
# A run that ends in error or is aborted fails its workflow (agentlane/run_outcome.py); runs
# recorded before completed with the result.
RUN_FAILS_PATCH = "run-fails-on-error"


class Patches:
    def __init__(self, current_code: str) -> None:
        self.current_code = current_code
        self.current = False

    def start(self) -> None:
        """At the start of each workflow run (each continue-as-new segment), before any other
        check."""
        self.current = workflow.patched(self.current_code)

    def __call__(self, patch_id: str) -> bool:
        """Whether the change behind `patch_id` is in force for this workflow run."""
        return self.current or workflow.patched(patch_id)
