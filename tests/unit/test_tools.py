"""The base tools without a server: workspace confinement, read / write / edit, exec (exit codes,
timeouts and cancellation kill the whole process group) and argument parsing."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from activities.tools.apply_patch import apply_patch
from activities.tools.exec_tool import run_exec
from activities.tools.file_tools import edit_file, write_file
from activities.tools.read_tool import PAGE_BYTES, read_file
from activities.tools.results import MAX_RESULT_CHARS, clip
from activities.tools.specs import (
    EditArgs,
    ExecArgs,
    InvalidToolArguments,
    ReadArgs,
    WriteArgs,
    parse_args,
    tool_spec,
    tool_specs,
)
from activities.tools.workspace import (
    PathOutsideWorkspace,
    WorkspaceMissing,
    display_path,
    resolve_in_workspace,
)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    other = tmp_path / "outside"
    other.mkdir()
    (other / "secret.txt").write_text("top secret\n")
    return other


def snapshot(*roots: Path) -> dict[str, bytes | None]:
    """Every path under the roots with its content (None for folders)."""
    out: dict[str, bytes | None] = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            out[str(p)] = None if p.is_dir() or p.is_symlink() else p.read_bytes()
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of a reaped shell may linger as a zombie until init reaps it.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def gone(pid: int, within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return not alive(pid)


# --- workspace confinement -----------------------------------------------------------------------


def test_relative_and_absolute_inside_paths_resolve(ws: Path) -> None:
    root = ws.resolve()
    assert resolve_in_workspace(str(ws), "a/b.txt") == root / "a" / "b.txt"
    assert resolve_in_workspace(str(ws), str(ws / "c.txt")) == root / "c.txt"
    assert resolve_in_workspace(str(ws), "sub/../d.txt") == root / "d.txt"
    assert resolve_in_workspace(str(ws), ".") == root


def test_workspace_reached_through_a_symlink(tmp_path: Path, ws: Path) -> None:
    link = tmp_path / "ws-link"
    link.symlink_to(ws)
    assert resolve_in_workspace(str(link), "f.txt") == ws.resolve() / "f.txt"
    assert display_path(str(link), ws.resolve() / "f.txt") == "f.txt"


def test_missing_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceMissing):
        resolve_in_workspace(str(tmp_path / "nope"), "a.txt")


def _escapes(ws: Path, outside: Path) -> list[str]:
    (ws / "to-secret").symlink_to(outside / "secret.txt")
    (ws / "to-missing").symlink_to(outside / "not-yet.txt")
    (ws / "linked-dir").symlink_to(outside)
    return [
        str(outside / "secret.txt"),
        "/etc/passwd",
        "../outside/secret.txt",
        "a/../../outside/new.txt",
        "to-secret",
        "to-missing",
        "linked-dir/secret.txt",
        "linked-dir/new.txt",
        "linked-dir/deeper/new.txt",
        "..",
        "a\x00b",
        "",
        "   ",
    ]


def test_paths_outside_the_workspace_are_refused(ws: Path, outside: Path) -> None:
    for raw in _escapes(ws, outside):
        with pytest.raises(PathOutsideWorkspace):
            resolve_in_workspace(str(ws), raw)


@pytest.mark.parametrize("tool", ["read", "write", "edit"])
def test_file_tools_touch_nothing_outside(ws: Path, outside: Path, tool: str) -> None:
    escapes = _escapes(ws, outside)
    before = snapshot(ws, outside)
    for raw in escapes:
        with pytest.raises(PathOutsideWorkspace):
            if tool == "read":
                read_file(str(ws), ReadArgs(path=raw))
            elif tool == "write":
                write_file(str(ws), WriteArgs(path=raw, content="pwned"))
            else:
                edit_file(str(ws), EditArgs(path=raw, old_string="top", new_string="pwned"))
    assert snapshot(ws, outside) == before
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not (outside / "not-yet.txt").exists()
    assert not (outside / "new.txt").exists()
    assert not (outside / "deeper").exists()


def test_errors_name_the_path_but_not_contents(ws: Path, outside: Path) -> None:
    with pytest.raises(PathOutsideWorkspace, match="outside the workspace") as info:
        read_file(str(ws), ReadArgs(path=str(outside / "secret.txt")))
    assert "top secret" not in str(info.value)
    with pytest.raises(PathOutsideWorkspace, match="NUL"):
        resolve_in_workspace(str(ws), "x\x00")
    with pytest.raises(PathOutsideWorkspace, match="non-empty"):
        resolve_in_workspace(str(ws), "")


# --- read ----------------------------------------------------------------------------------------


def test_read_whole_file(ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    res = read_file(str(ws), ReadArgs(path="a.txt"))
    assert not res.is_error
    assert res.text == "one\ntwo\nthree"
    assert res.summary == "3 lines"


def test_read_with_offset_and_limit_notes_more_lines(ws: Path) -> None:
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    res = read_file(str(ws), ReadArgs(path="n.txt", offset=2, limit=3))
    assert res.text == (
        "line 2\nline 3\nline 4\n… [lines 2-4 of 10 shown (5 more); call read with offset=5 "
        "for the next page]"
    )
    tail = read_file(str(ws), ReadArgs(path="n.txt", offset=5, limit=5))
    assert tail.text == "line 5\nline 6\nline 7\nline 8\nline 9"
    assert "more lines" not in tail.text
    past = read_file(str(ws), ReadArgs(path="n.txt", offset=50))
    assert past.is_error
    assert past.text == "offset 50 is past the end of n.txt: it has 10 lines (offsets 0 to 9)."


def test_read_missing_file(ws: Path) -> None:
    res = read_file(str(ws), ReadArgs(path="sub/missing.txt"))
    assert res.is_error
    assert res.text == "File not found: sub/missing.txt"


def test_read_folder_lists_it(ws: Path) -> None:
    (ws / "d" / "inner").mkdir(parents=True)
    (ws / "d" / "b.txt").write_text("x")
    res = read_file(str(ws), ReadArgs(path="d"))
    assert res.is_error
    assert res.text == "d is a folder containing:\nb.txt\ninner/"


def test_a_huge_folder_is_listed_in_part(ws: Path) -> None:
    big = ws / "many"
    big.mkdir()
    for n in range(2500):
        (big / f"file_{n:05d}.txt").touch()
    res = read_file(str(ws), ReadArgs(path="many"))
    listed = [line for line in res.text.splitlines() if line.startswith("file_")]
    assert len(listed) == 1000
    assert "… and 1500 more entries (the first 1000 found are listed)" in res.text
    assert len(res.text) < 40_000


def test_read_invalid_utf8_is_replaced(ws: Path) -> None:
    (ws / "bin").write_bytes(b"ok \xff\xfe end\n")
    res = read_file(str(ws), ReadArgs(path="bin"))
    assert res.text == "ok \ufffd\ufffd end"


def test_read_a_line_longer_than_a_page_is_cut_with_a_note(ws: Path) -> None:
    (ws / "big.txt").write_text("x" * (MAX_RESULT_CHARS * 2) + "\nsecond\n")
    res = read_file(str(ws), ReadArgs(path="big.txt"))
    assert len(res.text.encode()) < PAGE_BYTES + 300
    assert res.text.startswith("x" * 1000)
    assert "line 0 is longer than 50 KB and was cut" in res.text
    assert "call read with offset=1 for the next page" in res.text
    assert read_file(str(ws), ReadArgs(path="big.txt", offset=1)).text == "second"


def test_clip() -> None:
    assert clip("short", 10) == "short"
    clipped = clip("a" * 10 + "b" * 10, 10)
    assert clipped.startswith("aaaaa\n")
    assert clipped.endswith("\nbbbbb")
    assert "[10 characters omitted]" in clipped


# --- write ---------------------------------------------------------------------------------------


def test_write_creates_parents(ws: Path) -> None:
    res = write_file(str(ws), WriteArgs(path="a/b/c.txt", content="hello"))
    assert not res.is_error
    assert res.text == "Wrote 5 characters to a/b/c.txt"
    assert (ws / "a" / "b" / "c.txt").read_text() == "hello"


def test_write_overwrites_atomically(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = ws / "f.txt"
    target.write_text("old content")
    inode_before = target.stat().st_ino
    write_file(str(ws), WriteArgs(path="f.txt", content="new"))
    assert target.read_text() == "new"
    # Written to a temporary file and renamed over the target: a new inode, no leftovers.
    assert target.stat().st_ino != inode_before
    assert sorted(p.name for p in ws.iterdir()) == ["f.txt"]

    # If the rename fails, the old content is intact (never a half-written file).
    def broken_replace(src: object, dst: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr("activities.tools.text_files.os.replace", broken_replace)
    with pytest.raises(OSError, match="disk on fire"):
        write_file(str(ws), WriteArgs(path="f.txt", content="newer"))
    assert target.read_text() == "new"


def test_write_to_a_folder_is_an_error(ws: Path) -> None:
    (ws / "d").mkdir()
    res = write_file(str(ws), WriteArgs(path="d", content="x"))
    assert res.is_error
    assert (ws / "d").is_dir()


def test_write_is_idempotent(ws: Path) -> None:
    for _ in range(2):
        write_file(str(ws), WriteArgs(path="f.txt", content="same"))
    assert (ws / "f.txt").read_text() == "same"


# --- edit ----------------------------------------------------------------------------------------


def test_edit_unique_replace(ws: Path) -> None:
    (ws / "f.txt").write_text("alpha beta gamma\n")
    res = edit_file(str(ws), EditArgs(path="f.txt", old_string="beta", new_string="BETA"))
    assert not res.is_error
    assert res.text == "Edited f.txt"
    assert (ws / "f.txt").read_text() == "alpha BETA gamma\n"


def test_edit_not_found(ws: Path) -> None:
    (ws / "f.txt").write_text("alpha\n")
    res = edit_file(str(ws), EditArgs(path="f.txt", old_string="zeta", new_string="eta"))
    assert res.is_error
    assert res.text == "old_string not found in f.txt"
    assert (ws / "f.txt").read_text() == "alpha\n"


def test_edit_multiple_occurrences(ws: Path) -> None:
    (ws / "f.txt").write_text("x = 1\nx = 1\nx = 1\n")
    res = edit_file(str(ws), EditArgs(path="f.txt", old_string="x = 1", new_string="x = 2"))
    assert res.is_error
    assert "occurs 3 times" in res.text
    assert (ws / "f.txt").read_text() == "x = 1\nx = 1\nx = 1\n"


def test_edit_already_applied_is_success(ws: Path) -> None:
    (ws / "f.txt").write_text("hello world\n")
    args = EditArgs(path="f.txt", old_string="world", new_string="there")
    recorded: list[str] = []
    first = edit_file(str(ws), args, None, recorded.append)
    # A retried attempt after the edit landed brings the digest the first one recorded.
    second = edit_file(str(ws), args, recorded[0], recorded.append)
    assert not first.is_error
    assert not second.is_error
    assert second.text == "Edited f.txt (already applied)"
    assert (ws / "f.txt").read_text() == "hello there\n"


def test_an_edit_that_never_happened_is_not_called_applied(ws: Path) -> None:
    """new_string somewhere in the file says nothing about this edit: the model must hear that
    old_string was not found, not that its change was made."""
    (ws / "f.txt").write_text("return total\nreturn total\n")
    args = EditArgs(path="f.txt", old_string="return totl", new_string="return total")
    res = edit_file(str(ws), args)
    assert res.is_error
    assert res.text == "old_string not found in f.txt"


def test_edit_missing_file_and_empty_old_string(ws: Path) -> None:
    res = edit_file(str(ws), EditArgs(path="nope.txt", old_string="a", new_string="b"))
    assert res.is_error
    assert res.text == "File not found: nope.txt"
    (ws / "f.txt").write_text("abc")
    empty = edit_file(str(ws), EditArgs(path="f.txt", old_string="", new_string="b"))
    assert empty.is_error
    assert (ws / "f.txt").read_text() == "abc"


# --- exec ----------------------------------------------------------------------------------------


async def test_exec_exit_code_and_output(ws: Path) -> None:
    seen: list[str] = []
    res = await run_exec(str(ws), ExecArgs(command="echo hello; echo oops >&2; pwd"), seen.append)
    assert not res.is_error
    assert res.summary == "exit 0"
    assert res.text == f"exit code 0\nhello\noops\n{ws.resolve()}\n"
    assert "".join(seen) == f"hello\noops\n{ws.resolve()}\n"


async def test_exec_nonzero_exit_is_an_error(ws: Path) -> None:
    res = await run_exec(str(ws), ExecArgs(command="echo failing; exit 3"), lambda _: None)
    assert res.is_error
    assert res.summary == "exit 3"
    assert res.text == "exit code 3\nfailing\n"


async def test_exec_without_output(ws: Path) -> None:
    res = await run_exec(str(ws), ExecArgs(command="true"), lambda _: None)
    assert res.text == "exit code 0"
    assert not res.is_error


async def test_exec_stdin_is_closed(ws: Path) -> None:
    res = await run_exec(str(ws), ExecArgs(command="cat; echo done"), lambda _: None)
    assert res.text == "exit code 0\ndone\n"


async def test_exec_timeout_kills_the_process_group(ws: Path) -> None:
    started = time.monotonic()
    res = await asyncio.wait_for(
        run_exec(
            str(ws),
            ExecArgs(command="sleep 30 & echo $! > child.pid; echo started; wait", timeout=1),
            lambda _: None,
        ),
        timeout=10,
    )
    elapsed = time.monotonic() - started
    assert res.is_error
    assert res.text.startswith("Command timed out after 1s and was killed.")
    assert "started" in res.text
    assert res.summary == "timed out after 1s"
    assert elapsed < 5
    child = int((ws / "child.pid").read_text())
    assert await gone(child)


async def test_exec_default_timeout(ws: Path) -> None:
    res = await run_exec(str(ws), ExecArgs(command="sleep 30"), lambda _: None, default_timeout=1)
    assert res.is_error
    assert "timed out after 1s" in res.text


async def test_exec_background_child_does_not_outlive_the_timeout(ws: Path) -> None:
    # The shell exits at once but leaves a child holding the output pipe: the call must still
    # end within its timeout and the child must be killed.
    started = time.monotonic()
    res = await asyncio.wait_for(
        run_exec(
            str(ws),
            ExecArgs(command="sleep 30 & echo $! > child.pid; echo left running", timeout=1),
            lambda _: None,
        ),
        timeout=10,
    )
    assert time.monotonic() - started < 5
    assert "left running" in res.text
    child = int((ws / "child.pid").read_text())
    assert await gone(child)


async def test_exec_cancellation_kills_the_process_group(ws: Path) -> None:
    seen: list[str] = []
    ready = asyncio.Event()

    def on_output(text: str) -> None:
        seen.append(text)
        if "ready" in "".join(seen):
            ready.set()

    task = asyncio.create_task(
        run_exec(
            str(ws),
            ExecArgs(command="sleep 30 & echo $! > child.pid; echo ready; wait", timeout=60),
            on_output,
        )
    )
    await asyncio.wait_for(ready.wait(), timeout=5)
    child = int((ws / "child.pid").read_text())
    assert alive(child)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done == {task}, "the cancelled command did not end"
    with pytest.raises(asyncio.CancelledError):
        task.result()
    assert await gone(child)


async def test_exec_missing_workspace(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceMissing):
        await run_exec(str(tmp_path / "nope"), ExecArgs(command="true"), lambda _: None)


# --- argument parsing and specs ------------------------------------------------------------------


def test_parse_args_ok() -> None:
    args = parse_args(ReadArgs, {"path": "a.txt", "offset": 3})
    assert args == ReadArgs(path="a.txt", offset=3, limit=2000)


def test_parse_args_errors_are_readable() -> None:
    with pytest.raises(InvalidToolArguments) as info:
        parse_args(ReadArgs, {})
    assert str(info.value) == "invalid arguments: path: Field required"

    with pytest.raises(InvalidToolArguments) as info:
        parse_args(EditArgs, {"path": "a", "old_string": "x"})
    assert str(info.value) == "invalid arguments: new_string: Field required"

    with pytest.raises(InvalidToolArguments) as info:
        parse_args(ReadArgs, {"path": "a", "limit": 0, "colour": "red"})
    message = str(info.value)
    assert message.startswith("invalid arguments: ")
    assert "limit: Input should be greater than or equal to 1" in message
    assert "colour: Extra inputs are not permitted" in message
    assert "; " in message

    with pytest.raises(InvalidToolArguments, match="timeout: "):
        parse_args(ExecArgs, {"command": "ls", "timeout": 0})


def test_tool_specs() -> None:
    spec = tool_spec("read")
    assert spec.name == "read"
    assert spec.parameters["required"] == ["path"]
    assert set(spec.parameters["properties"]) == {"path", "offset", "limit"}
    assert "title" not in spec.parameters
    assert all("title" not in p for p in spec.parameters["properties"].values())
    assert spec.parameters["additionalProperties"] is False
    assert [s.name for s in tool_specs(["exec", "unknown", "write"])] == ["exec", "write"]
    assert tool_spec("edit").parameters["required"] == ["path", "old_string", "new_string"]


def test_retried_edit_whose_new_text_contains_the_old_is_not_applied_twice(
    tmp_path: Path,
) -> None:
    from activities.tools.file_tools import edit_file

    (tmp_path / "f.txt").write_text("foo\n")
    args = EditArgs(path="f.txt", old_string="foo", new_string="foo bar")
    recorded: list[str] = []
    first = edit_file(str(tmp_path), args, None, recorded.append)
    assert not first.is_error and (tmp_path / "f.txt").read_text() == "foo bar\n"
    # The worker died before reporting; the retry brings the digest the first attempt recorded.
    again = edit_file(str(tmp_path), args, recorded[0], recorded.append)
    assert "already applied" in again.text
    assert (tmp_path / "f.txt").read_text() == "foo bar\n"


async def test_exec_truncation_counts_exactly(ws: Path) -> None:
    """200 000 lines of 10 bytes (2 MB): head and tail shown, the omitted count exact."""
    res = await run_exec(str(ws), ExecArgs(command="seq -f '%09g' 1 200000"), lambda _: None)
    body = res.text.removeprefix("exit code 0\n")
    head, _, rest = body.partition("\n… [")
    count = int(rest.split(" characters omitted")[0])
    tail = rest.split("] …\n", 1)[1]
    assert len(head) + count + len(tail) == 2_000_000
    assert head.startswith("000000001\n") and tail.endswith("000200000\n")


async def test_exec_past_the_capture_cap_shows_the_real_end(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import activities.tools.exec_tool as exec_tool

    monkeypatch.setattr(exec_tool, "MAX_CAPTURE_BYTES", 1_000_000)
    res = await run_exec(str(ws), ExecArgs(command="seq -f '%09g' 1 300000"), lambda _: None)
    assert "bytes omitted; the command wrote 3000000 bytes" in res.text
    body = res.text.removeprefix("exit code 0\n")
    head, _, rest = body.partition("\n… [")
    omitted = int(rest.split(" bytes omitted")[0])
    tail = rest.split("] …\n", 1)[1]
    assert len(head.encode()) + omitted + len(tail.encode()) == 3_000_000
    assert tail.endswith("000300000\n")


def test_stream_previews_of_tool_arguments() -> None:
    from activities.tool_calls import PREVIEW_ARG_CHARS, preview_args

    args = {"path": "big.txt", "content": "x" * 50_000, "n": 3}
    shown = preview_args(args)
    assert shown["path"] == "big.txt" and shown["n"] == 3
    assert shown["content"].startswith("x" * PREVIEW_ARG_CHARS)
    assert shown["content"].endswith(f"[{50_000 - PREVIEW_ARG_CHARS} more characters]")
    assert args["content"] == "x" * 50_000  # the call itself is untouched


def test_edit_and_patch_change_the_lines_and_nothing_else(ws: Path) -> None:
    # A script stays executable, a private file private, a CRLF file CRLF (with its byte-order
    # mark); an edit or patch of one line rewrites nothing else.
    script, private, crlf = ws / "run.sh", ws / "key.env", ws / "win.txt"
    script.write_text("#!/bin/sh\necho one\n")
    script.chmod(0o755)
    private.write_text("secret=1\n")
    private.chmod(0o600)
    crlf.write_bytes(b"\xef\xbb\xbfa\r\nx\r\nc\r\n")
    assert not edit_file(
        str(ws), EditArgs(path="run.sh", old_string="one", new_string="two")
    ).is_error
    assert not edit_file(str(ws), EditArgs(path="key.env", old_string="1", new_string="2")).is_error
    edited = edit_file(str(ws), EditArgs(path="win.txt", old_string="x\nc", new_string="y\nc"))
    assert not edited.is_error
    assert (script.stat().st_mode & 0o777, private.stat().st_mode & 0o777) == (0o755, 0o600)
    assert crlf.read_bytes() == b"\xef\xbb\xbfa\r\ny\r\nc\r\n"
    patch = "*** Begin Patch\n*** Update File: win.txt\n@@\n a\n-y\n+z\n*** End Patch"
    assert not apply_patch(str(ws), patch).is_error
    assert crlf.read_bytes() == b"\xef\xbb\xbfa\r\nz\r\nc\r\n"
    patch = "*** Begin Patch\n*** Update File: run.sh\n@@\n-echo two\n+echo three\n*** End Patch"
    assert not apply_patch(str(ws), patch).is_error
    assert script.stat().st_mode & 0o777 == 0o755 and "three" in script.read_text()


def test_an_edit_of_a_file_that_is_not_utf8_changes_nothing(ws: Path) -> None:
    latin = ws / "l1.txt"
    latin.write_bytes(b"caf\xe9\nx\n")
    refused = edit_file(str(ws), EditArgs(path="l1.txt", old_string="x", new_string="y"))
    assert refused.is_error and "not UTF-8 text (byte 0xe9 at offset 3)" in refused.text
    assert latin.read_bytes() == b"caf\xe9\nx\n"


def test_a_planted_symlink_beside_a_file_leads_no_write_outside(ws: Path, tmp_path: Path) -> None:
    """The temporary file a write goes through is made fresh (a name nobody chose, never through
    a symlink): a workspace that holds a symlink where a fixed temporary name would be (a cloned
    repository can) does not get its target written."""
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (ws / "notes.txt").write_text("old\n")
    for name in ("notes.txt", "new.txt"):
        (ws / f".{name}.agentlane-tmp").symlink_to(outside)
    write_file(str(ws), WriteArgs(path="notes.txt", content="new\n"))
    write_file(str(ws), WriteArgs(path="new.txt", content="fresh\n"))
    edit_file(str(ws), EditArgs(path="notes.txt", old_string="new", new_string="newer"))
    assert outside.read_text() == "precious\n"
    assert not (ws / "notes.txt").is_symlink() and (ws / "notes.txt").read_text() == "newer\n"
    assert (ws / "new.txt").read_text() == "fresh\n"
    assert not [p for p in ws.iterdir() if p.name.endswith(".agentlane-tmp") and not p.is_symlink()]


def test_a_page_far_into_a_file_is_the_same_lines_as_reading_up_to_it(tmp_path: Path) -> None:
    """Lines are skipped by counting newlines a MiB at a time; the page is what reading line by
    line gives, long lines (counted as one) and a last line without a newline included."""
    import random

    from activities.tools.read_tool import read_page

    rng = random.Random(7)
    pieces = []
    for n in range(30_000):
        size = rng.choice([0, 1, 5, 40, 300, 70_000]) if n % 997 else 200_000
        pieces.append(("x" * size) + f"#{n}")
    path = tmp_path / "mixed.txt"
    path.write_text("\n".join(pieces))  # no newline at the end
    for offset in (0, 1, 996, 997, 5_000, 29_990, 29_999):
        lines, cut = read_page(path, offset, 20, page_bytes=100_000)
        assert lines, offset
        assert lines[0].endswith(f"#{offset}") or cut, (offset, lines[0][-20:])
        assert lines[0][-len(f"#{offset}") :] == f"#{offset}" or len(lines[0]) >= 99_000


def test_a_patch_to_a_file_larger_than_edit_takes_is_refused(ws: Path) -> None:
    from activities.tools.apply_patch import MAX_PATCHED_BYTES

    big = ws / "big.txt"
    big.write_text("FIRST\n" + "x" * MAX_PATCHED_BYTES)
    patch = "*** Begin Patch\n*** Update File: big.txt\n@@\n-FIRST\n+CHANGED\n*** End Patch"
    res = apply_patch(str(ws), patch)
    assert res.is_error
    assert "more than the 5000000 a patch may change" in res.text
    assert big.read_text().startswith("FIRST\n")


def test_a_symlink_loop_is_the_models_error_not_the_runs(ws: Path) -> None:
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(ws / "a")
    with pytest.raises(PathOutsideWorkspace, match="cannot be resolved"):
        resolve_in_workspace(str(ws), "a/x.txt")


def test_write_to_a_path_ending_in_a_slash_is_refused(ws: Path) -> None:
    res = write_file(str(ws), WriteArgs(path="a.txt/", content="x"))
    assert res.is_error and "names a folder" in res.text
    assert not (ws / "a.txt").exists()
