"""The offline model calls every tool: apply_patch (a patch spanning lines) and process."""

from __future__ import annotations

from activities.providers.offline_planner import LAST_PROCESS, PlannedTool, make_plan


def test_a_patch_is_one_step_whatever_its_lines() -> None:
    patch = "*** Begin Patch\n*** Add File: a.txt\n+one; two\n+then three\n*** End Patch"
    plan = make_plan(f"apply this patch:\n{patch}\nthen read a.txt")
    assert plan.steps == [
        PlannedTool("apply_patch", {"input": patch}),
        PlannedTool("read", {"path": "a.txt"}),
    ]


def test_background_processes() -> None:
    plan = make_plan(
        "start `python3 -m http.server; echo done` in the background then poll it for 2 seconds "
        'then send "q" to it and close then kill proc-2 then list processes'
    )
    assert plan.steps == [
        PlannedTool("process", {"action": "start", "command": "python3 -m http.server; echo done"}),
        PlannedTool("process", {"action": "poll", "id": LAST_PROCESS, "wait_seconds": 2.0}),
        PlannedTool(
            "process", {"action": "write", "id": LAST_PROCESS, "input": "q", "close_stdin": True}
        ),
        PlannedTool("process", {"action": "kill", "id": "proc-2"}),
        PlannedTool("process", {"action": "list"}),
    ]
