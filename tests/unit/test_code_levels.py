"""Which patches a code level covers, and a level named by a workflow's input
(workflows/patches.py)."""

from __future__ import annotations

import pytest
from temporalio.exceptions import FailureError

from workflows.patches import (
    BOUNDED_FATES_PATCH,
    RUN_CODE,
    SESSION_CODE,
    SETTLED_WAIT_PATCH,
    STEER_BACKLOG_COPY_PATCH,
    CodeLevel,
    Patches,
    UnknownCodeLevel,
    newest,
    not_covered,
)


def test_a_code_level_covers_the_patches_of_its_own_and_older_levels() -> None:
    levels = [
        CodeLevel("c1"),
        CodeLevel("c2", frozenset({"p2"})),
        CodeLevel("c3", frozenset({"p3"})),
    ]
    assert not_covered(levels, 2) == frozenset()
    assert not_covered(levels, 1) == {"p3"}
    assert not_covered(levels, 0) == {"p2", "p3"}


def test_a_level_named_by_the_input_needs_no_marker() -> None:
    patches = Patches(SESSION_CODE)
    patches.start(newest(SESSION_CODE))  # no workflow context: no `workflow.patched` asked
    assert patches.from_input and patches(BOUNDED_FATES_PATCH) and patches("any-older-patch")
    assert patches(SETTLED_WAIT_PATCH)
    assert patches.own_marker("stop-processes-on-reset-and-close")
    older = Patches(SESSION_CODE)
    older.start(SESSION_CODE[0].marker)
    later = frozenset().union(*(level.adds for level in SESSION_CODE[1:]))
    assert older.uncovered == later
    assert {BOUNDED_FATES_PATCH, SETTLED_WAIT_PATCH, STEER_BACKLOG_COPY_PATCH} <= later
    assert older("any-older-patch")
    fates_level = Patches(SESSION_CODE)
    fates_level.start("session-code-2026-11-26")
    assert fates_level.uncovered == later - {BOUNDED_FATES_PATCH}
    assert fates_level(BOUNDED_FATES_PATCH)


def test_a_level_this_code_does_not_know_fails_the_task_not_the_workflow() -> None:
    patches = Patches(RUN_CODE)
    with pytest.raises(UnknownCodeLevel, match="upgrade the worker"):
        patches.start("run-code-2099-01")
    assert not issubclass(UnknownCodeLevel, FailureError)


def test_every_patch_added_since_code_levels_is_in_a_level() -> None:
    # A patch no level lists counts as covered by every level: a history recorded before it
    # would replay down its new branch (as happened once, caught by the replay test).
    from workflows import patches

    listed = set().union(
        *(
            level.adds
            for levels in (patches.RUN_CODE, patches.SESSION_CODE, patches.EVENTS_CODE)
            for level in levels
        )
    )
    defined = {
        value
        for name, value in vars(patches).items()
        if name.endswith("_PATCH") and isinstance(value, str)
    }
    # Older than code levels: covered by every level's first marker.
    before_levels = {patches.RUN_FAILS_PATCH}
    assert defined - before_levels <= listed, sorted(defined - before_levels - listed)
