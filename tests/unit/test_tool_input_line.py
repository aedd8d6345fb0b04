"""The terminal's `⚙ tool …` line says what each call does (clients/tool_line.py)."""

from __future__ import annotations

import io

from agentlane.events import AgentEvent, EventKind
from clients.render import TerminalRenderer
from clients.tool_line import tool_input_preview

PATCH = """*** Begin Patch
*** Add File: notes/plan.md
+step one
*** Update File: src/app.py
*** Move to: src/main.py
@@ def main():
-    pass
+    run()
*** Delete File: old.txt
*** End Patch"""


def test_apply_patch_names_the_files_it_touches() -> None:
    line = tool_input_preview("apply_patch", {"input": PATCH})
    assert line == "add notes/plan.md, update src/app.py → src/main.py, delete old.txt"


def test_a_patch_cut_short_on_the_stream_says_there_is_more() -> None:
    cut = PATCH[:60] + "… [900 more characters]"
    assert tool_input_preview("apply_patch", {"input": cut}) == "add notes/plan.md, …"


def test_process_shows_the_action_and_its_command_or_process() -> None:
    start = {"action": "start", "command": "python  -m http.server 8000"}
    assert tool_input_preview("process", start) == "start python -m http.server 8000"
    assert tool_input_preview("process", {"action": "poll", "id": "p3"}) == "poll p3"
    assert tool_input_preview("process", {"action": "list"}) == "list"


def test_other_tools_keep_their_command_path_or_task_and_long_lines_are_cut() -> None:
    assert tool_input_preview("exec", {"command": "wc -l\nnotes.txt"}) == "wc -l notes.txt"
    assert tool_input_preview("read", {"path": "a.txt"}) == "a.txt"
    long = tool_input_preview("exec", {"command": "x" * 300})
    assert len(long) == 98 and long.endswith("…")
    assert tool_input_preview("exec", "not a dict") == ""


def test_the_renderer_line_for_apply_patch_and_process_is_not_empty() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out, color=False)
    for i, (tool, args) in enumerate(
        [("apply_patch", {"input": PATCH}), ("process", {"action": "kill", "id": "p1"})]
    ):
        renderer.render(
            AgentEvent(
                kind=EventKind.TOOL_EXECUTION_START,
                event_id=f"e{i}",
                session_key="s",
                run_id="r",
                tool_name=tool,
                data={"input": args},
            )
        )
    lines = out.getvalue().splitlines()
    assert lines == [
        "⚙ apply_patch add notes/plan.md, update src/app.py → src/main.py, delete old.txt",
        "⚙ process kill p1",
    ]
