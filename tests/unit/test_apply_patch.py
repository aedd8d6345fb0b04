"""apply_patch: the parser, exact hunk matching, all-or-nothing, and finishing a saved plan."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from activities.tools.apply_patch import PatchError, apply_hunks, apply_patch, parse_patch
from activities.tools.workspace import PathOutsideWorkspace


def patch(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"])


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_parse_add_update_move_delete() -> None:
    ops = parse_patch(
        patch(
            "*** Add File: new.txt",
            "+one",
            "+two",
            "*** Update File: src/a.py",
            "*** Move to: src/b.py",
            "@@ def f():",
            " x = 1",
            "-y = 2",
            "+y = 3",
            "*** End of File",
            "*** Delete File: old.txt",
        )
    )
    assert [(o.kind, o.path) for o in ops] == [
        ("add", "new.txt"),
        ("update", "src/a.py"),
        ("delete", "old.txt"),
    ]
    assert ops[0].lines == ["one", "two"]
    update = ops[1]
    assert update.move_to == "src/b.py"
    (hunk,) = update.hunks
    assert hunk.context == "def f():"
    assert hunk.old == ["x = 1", "y = 2"]
    assert hunk.new == ["x = 1", "y = 3"]
    assert hunk.at_end


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("*** Add File: a\n+x\n*** End Patch", "must start with"),
        ("*** Begin Patch\n*** Add File: a\n+x", "must end with"),
        (patch(), "changes no file"),
        (patch("*** Add File: a", "x"), "starts with '+'"),
        (patch("*** Update File: a"), "has no hunks"),
        (patch("*** Update File: a", "@@", "?bad"), "starts with ' ', '-' or '+'"),
        (patch("*** Rename File: a"), "expected '*** Add File: '"),
        (patch("*** Delete File: "), "needs a path"),
    ],
)
def test_malformed_patches_are_named(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=re.escape(message)):
        parse_patch(text)


def test_hunks_apply_in_order_with_context_lines() -> None:
    text = "a\nb\nc\nd\nb\ne\n"
    ops = parse_patch(patch("*** Update File: f", "@@ d", "-b", "+B", "@@", " e", "+f"))
    assert apply_hunks(text, ops[0].hunks, "f") == "a\nb\nc\nd\nB\ne\nf\n"


def test_first_hunk_may_leave_out_its_marker_and_no_trailing_newline_is_kept() -> None:
    ops = parse_patch(patch("*** Update File: f", " a", "-b", "+c"))
    assert apply_hunks("a\nb", ops[0].hunks, "f") == "a\nc"


def test_crlf_files_keep_their_line_endings() -> None:
    ops = parse_patch(patch("*** Update File: f", "-b", "+c"))
    assert apply_hunks("a\r\nb\r\n", ops[0].hunks, "f") == "a\r\nc\r\n"


def test_context_must_match_exactly() -> None:
    ops = parse_patch(patch("*** Update File: f", "@@", " a", "-b ", "+c"))
    with pytest.raises(PatchError) as err:
        apply_hunks("a\nb\n", ops[0].hunks, "f")
    assert "hunk 1 of 1 in f did not apply: these lines were not found exactly" in str(err.value)
    assert str(err.value).endswith("a\nb ")


def test_end_of_file_hunk_only_matches_at_the_end() -> None:
    ops = parse_patch(patch("*** Update File: f", "-x", "+y", "*** End of File"))
    with pytest.raises(PatchError, match="at the end of the file"):
        apply_hunks("x\nz\n", ops[0].hunks, "f")
    assert apply_hunks("z\nx\n", ops[0].hunks, "f") == "z\ny\n"


def test_a_patch_over_several_files(ws: Path) -> None:
    (ws / "a.txt").write_text("one\ntwo\nthree\n")
    (ws / "old.txt").write_text("bye\n")
    (ws / "m.txt").write_text("move me\n")
    res = apply_patch(
        str(ws),
        patch(
            "*** Add File: sub/new.txt",
            "+hello",
            "*** Update File: a.txt",
            "@@",
            " one",
            "-two",
            "+TWO",
            "*** Delete File: old.txt",
            "*** Update File: m.txt",
            "*** Move to: moved/m.txt",
            "-move me",
            "+moved",
        ),
    )
    assert not res.is_error, res.text
    assert res.text.splitlines()[1:] == [
        "A sub/new.txt",
        "M a.txt",
        "D old.txt",
        "R m.txt -> moved/m.txt",
    ]
    assert res.summary == "4 files"
    assert (ws / "sub/new.txt").read_text() == "hello\n"
    assert (ws / "a.txt").read_text() == "one\nTWO\nthree\n"
    assert not (ws / "old.txt").exists()
    assert not (ws / "m.txt").exists()
    assert (ws / "moved/m.txt").read_text() == "moved\n"


def test_a_failing_hunk_changes_no_file(ws: Path) -> None:
    (ws / "a.txt").write_text("one\n")
    (ws / "b.txt").write_text("two\n")
    res = apply_patch(
        str(ws),
        patch(
            "*** Update File: a.txt",
            "-one",
            "+ONE",
            "*** Add File: c.txt",
            "+new",
            "*** Update File: b.txt",
            "@@",
            "-three",
            "+THREE",
        ),
    )
    assert res.is_error
    assert res.text.startswith("Patch not applied, no file was changed: hunk 1 of 1 in b.txt")
    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "b.txt").read_text() == "two\n"
    assert not (ws / "c.txt").exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (("*** Add File: a.txt", "+x"), "cannot add a.txt: it already exists"),
        (("*** Delete File: nope.txt",), "cannot delete nope.txt: file not found"),
        (("*** Delete File: a.txt", "*** Delete File: ./a.txt"), "appears twice"),
    ],
)
def test_files_that_cannot_take_the_change(ws: Path, body: tuple[str, ...], message: str) -> None:
    (ws / "a.txt").write_text("x\n")
    res = apply_patch(str(ws), patch(*body))
    assert res.is_error
    assert message in res.text
    assert (ws / "a.txt").read_text() == "x\n"


def test_paths_stay_in_the_workspace(ws: Path) -> None:
    with pytest.raises(PathOutsideWorkspace):
        apply_patch(str(ws), patch("*** Add File: ../escape.txt", "+x"))
    assert not (ws.parent / "escape.txt").exists()


def test_a_saved_plan_is_finished_not_applied_again(ws: Path) -> None:
    """A retried attempt: the first saved its plan and wrote one file before it died."""
    (ws / "a.txt").write_text("n = 1\n")
    (ws / "b.txt").write_text("m = 1\n")
    text = patch(
        "*** Update File: a.txt",
        "-n = 1",
        "+n = 1",
        "+n = 2",
        "*** Update File: b.txt",
        "-m = 1",
        "+m = 2",
    )
    saved: list[dict[str, Any]] = []
    first = apply_patch(str(ws), text, None, saved.append)
    assert not first.is_error
    assert (ws / "a.txt").read_text() == "n = 1\nn = 2\n"
    # The crash came after a.txt was written and before b.txt was.
    (ws / "b.txt").write_text("m = 1\n")
    again = apply_patch(str(ws), text, saved[0], None)
    assert not again.is_error
    assert "finished after an interrupted attempt" in again.text
    # Applied once: a.txt did not get a second "n = 2" (its hunk would still match).
    assert (ws / "a.txt").read_text() == "n = 1\nn = 2\n"
    assert (ws / "b.txt").read_text() == "m = 2\n"
