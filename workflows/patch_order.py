"""Patches decided at a workflow's start, before its first local activity.

`workflow.patched` records its marker command where it is first called. Called after a local
activity within the same workflow task, the marker lands after that activity's marker, and a
replay of a history cut inside that task (a query answered from a history taken while the task
was open, or after the worker evicted the workflow) meets the marker before the workflow code has
made the call again: `[TMPRL1100] Non-deprecated patch marker encountered for change ..., but
there is no corresponding change command`. Executions started from this version on decide those
patches first, in the workflow's first activation (the SDK memoises each answer, so the later
calls make no command). Executions recorded before keep their order: they have no
`PATCHES_FIRST` marker, so a replay takes the old path.
"""

from __future__ import annotations

from collections.abc import Iterable

from temporalio import workflow

PATCHES_FIRST = "patches-decided-first"


def decide_first(patch_ids: Iterable[str]) -> None:
    """Call before the workflow's first await. The patches named are those a run would otherwise
    first ask after a local activity in the same task."""
    if workflow.patched(PATCHES_FIRST):
        for patch_id in patch_ids:
            workflow.patched(patch_id)
