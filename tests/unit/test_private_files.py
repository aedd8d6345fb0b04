"""What the project makes under the data dir is its user's alone, folders above included."""

from __future__ import annotations

import stat
from pathlib import Path

from agentlane.private_files import make_private_dir


def test_every_folder_made_is_0700(tmp_path: Path) -> None:
    deep = tmp_path / "sessions" / "alice" / "processes"
    make_private_dir(deep)
    for folder in (tmp_path / "sessions", tmp_path / "sessions" / "alice", deep):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    make_private_dir(deep)  # again: nothing to do
