"""The run workflow's patch markers: one per run where there used to be one per patch.

Every change to the run's command sequence since the first recorded histories sits behind a
`workflow.patched(...)` check, and each check a run reaches writes its own marker: three or
four `core_patch` rows on every run's page in the UI, saying nothing to an operator. A run
recorded since this change writes one marker, `RUN_CODE_PATCH`, at its start, and every other
check of the run (`patches(X)`) then answers yes without a marker of its own. A history without
that marker (recorded before, or a run in flight when the worker was upgraded) asks each patch
as before, so it replays, and goes on, exactly as it did.
"""

from __future__ import annotations

from temporalio import workflow

# The one marker of runs recorded since: every patch of the run is in force.
RUN_CODE_PATCH = "run-code-2026-11"
# A run that ends in error or is aborted fails its workflow (agentlane/run_outcome.py); runs
# recorded before completed with the result.
RUN_FAILS_PATCH = "run-fails-on-error"


class RunPatches:
    def __init__(self) -> None:
        self.current = False

    def start(self) -> None:
        """At the start of each run segment, before any other check."""
        self.current = workflow.patched(RUN_CODE_PATCH)

    def __call__(self, patch_id: str) -> bool:
        """Whether the change behind `patch_id` is in force for this run."""
        return self.current or workflow.patched(patch_id)
