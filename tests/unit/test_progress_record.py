"""The progress record kept beside every summary (issue 10; SPEC §11.3 step 2)."""

from __future__ import annotations

from activities.context.progress_record import (
    MAX_TOOL_FAILURE_CHARS,
    ProgressRecord,
    format_tool_failures,
    render_file_lists,
    render_progress_record,
    update_progress_record,
)
from agentlane.transcript import TranscriptEntry
from tests.unit.transcript_factory import assistant, call, result, user


def session() -> list[TranscriptEntry]:
    return [
        user("u1", "Refactor the parser in src/parse.py and keep the tests green."),
        assistant(
            "a1",
            "",
            call("c1", "read", path="src/parse.py"),
            call("c2", "read", path="tests/test_parse.py"),
        ),
        result("c1", "def parse(): ..."),
        result("c2", "def test(): ..."),
        assistant(
            "a2", "", call("c3", "edit", path="src/parse.py", old_string="a", new_string="b")
        ),
        result("c3", "ok", name="edit"),
        assistant("a3", "", call("c4", "exec", command="pytest -q\n# second line")),
        result("c4", "exit code 1\nFAILED test_parse", name="exec", is_error=True),
        user("u2", "Now also update the README."),
        assistant("a4", "", call("c5", "write", path="README.md", content="...")),
    ]


def test_the_record_of_a_session() -> None:
    record = update_progress_record(None, session())
    assert record.task == "Refactor the parser in src/parse.py and keep the tests green."
    assert record.last_user_instruction == "Now also update the README."
    assert record.files_read == ("src/parse.py", "tests/test_parse.py")
    assert record.files_modified == ("src/parse.py",)
    assert record.commands == ("pytest -q",)
    assert [f.call_id for f in record.tool_failures] == ["c4"]
    failure = record.tool_failures[0]
    assert failure.tool_name == "exec"
    assert failure.meta == "exitCode=1"
    assert failure.summary == "exit code 1 FAILED test_parse"
    assert [(c.call_id, c.tool_name, c.path) for c in record.open_tool_calls] == [
        ("c5", "write", "README.md")
    ]
    assert record.last_entry_id == "a4"


def test_folding_new_entries_into_an_older_record() -> None:
    entries = session()
    older = update_progress_record(None, entries)
    newer = update_progress_record(
        older, entries + [result("c5", "written", name="write"), user("u3", "thanks")]
    )
    assert newer.open_tool_calls == ()
    assert newer.files_modified == ("src/parse.py", "README.md")
    assert newer.task == older.task
    assert newer.last_user_instruction == "thanks"
    assert newer.last_entry_id == "u3"


def test_folding_the_same_entries_twice_changes_nothing() -> None:
    entries = session()
    once = update_progress_record(None, entries)
    assert update_progress_record(once, entries) is once
    assert update_progress_record(once, []) is once


def test_a_record_survives_a_round_trip_as_json() -> None:
    record = update_progress_record(None, session())
    assert ProgressRecord.model_validate_json(record.model_dump_json()) == record


def test_failed_writes_do_not_count_as_modified() -> None:
    entries = [
        assistant("a", "", call("c1", "write", path="x.txt"), call("c2", "read", path="y.txt")),
        result("c1", "permission denied", name="write", is_error=True),
        result("c2", "No such file", name="read", is_error=True),
    ]
    record = update_progress_record(None, entries)
    assert record.files_modified == () and record.files_read == ()
    assert record.tool_failures_total == 2


def test_failures_are_deduplicated_and_the_most_recent_eight_kept() -> None:
    entries: list[TranscriptEntry] = []
    for n in range(12):
        entries.append(assistant(f"a{n}", "", call(f"c{n}", "exec", command=f"cmd {n}")))
        entries.append(result(f"c{n}", f"boom {n}", name="exec", is_error=True))
    entries.append(result("c11", "boom again", name="exec", is_error=True, entry_id="dup"))
    record = update_progress_record(None, entries)
    assert record.tool_failures_total == 12
    assert [f.call_id for f in record.tool_failures] == [f"c{n}" for n in range(4, 12)]
    section = format_tool_failures(record)
    assert section.startswith("\n\n## Tool Failures\n- exec: boom 4")
    assert section.endswith("\n- ...and 4 more")
    assert len(record.commands) == 10 and record.commands[-1] == "cmd 11"


def test_failure_summaries_are_capped_and_meta_is_read() -> None:
    long = result(
        "c1", "e" * 1_000, name="exec", is_error=True, meta={"status": "killed", "exit_code": 137}
    )
    empty = result("c2", "  ", name="", is_error=True)
    record = update_progress_record(
        None, [assistant("a", "", call("c1", "exec"), call("c2", "exec")), long, empty]
    )
    first, second = record.tool_failures
    assert len(first.summary) == MAX_TOOL_FAILURE_CHARS and first.summary.endswith("...")
    assert first.meta == "status=killed exitCode=137"
    assert second.summary == "failed (no output)"
    assert second.tool_name == "exec"  # restored from the call


def test_unfinished_turns_leave_no_open_calls() -> None:
    entries = [assistant("a", "", call("c1", "exec", command="sleep 100"), stop_reason="aborted")]
    assert update_progress_record(None, entries).open_tool_calls == ()


def test_a_file_touched_again_moves_to_the_most_recent_end() -> None:
    entries = [
        assistant("a", "", call("c1", "read", path="a"), call("c2", "read", path="b")),
        result("c1"),
        result("c2"),
        assistant("b", "", call("c3", "read", path="a")),
        result("c3"),
    ]
    assert update_progress_record(None, entries).files_read == ("b", "a")


def test_file_lists_render_most_recent_first_and_read_excludes_modified() -> None:
    record = ProgressRecord(files_read=("a", "b", "c"), files_modified=("b", "d"))
    assert render_file_lists(record) == (
        "\n\n<read-files>\nc\na\n</read-files>\n\n<modified-files>\nd\nb\n</modified-files>"
    )


def test_rendered_sections() -> None:
    text = render_progress_record(update_progress_record(None, session()))
    assert text.startswith("\n\n## Task as first given\nRefactor the parser")
    assert "## Latest user instruction\nNow also update the README." in text
    assert "## Open tool calls\n- write (c5): README.md" in text
    assert "## Recent commands\n- pytest -q" in text
    assert "## Tool Failures\n- exec (exitCode=1): exit code 1 FAILED test_parse" in text
    assert "<read-files>\ntests/test_parse.py\n</read-files>" in text
    assert "<modified-files>\nsrc/parse.py\n</modified-files>" in text


def test_empty_and_tool_only_transcripts() -> None:
    empty = update_progress_record(None, [])
    assert empty == ProgressRecord()
    assert render_progress_record(empty) == ""
    only_results = update_progress_record(
        None, [result("c1", "x"), result("c2", "y", is_error=True)]
    )
    assert only_results.task == ""
    assert only_results.tool_failures_total == 1
    assert only_results.files_read == ()


def test_long_and_unicode_user_text() -> None:
    record = update_progress_record(None, [user("u", "タスク " * 1_000)])
    assert len(record.task) == 2_000
    assert record.task.endswith("…[truncated]")
    assert record.task.startswith("タスク")


def test_the_same_task_is_not_repeated_as_latest_instruction() -> None:
    text = render_progress_record(update_progress_record(None, [user("u", "do it")]))
    assert text == "\n\n## Task as first given\ndo it"
