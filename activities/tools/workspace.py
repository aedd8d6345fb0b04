"""Confines tool paths to the session's workspace.

A path is resolved against the workspace and through every symlink; anything that lands outside
the workspace (absolute paths elsewhere, `..`, a symlink pointing out) is refused before any file
is touched.
"""

from __future__ import annotations

from pathlib import Path


class PathOutsideWorkspace(Exception):
    pass


def local_workspace(workspace: str, data_dir: Path | None) -> str:
    """Where `workspace` is on this worker's disk. A session's default workspace is named
    relative to a data dir (`workspaces/<name>`, clients/api.py): that of the host that runs its
    tools, this worker's, not the data dir of the client that made the session. An absolute
    path (a folder the session was given) and "" (the run's recorded one) stay as they are."""
    if not workspace or data_dir is None or Path(workspace).is_absolute():
        return workspace
    return str(data_dir / workspace)


class WorkspaceMissing(Exception):
    pass


def workspace_root(workspace: str) -> Path:
    root = Path(workspace)
    if not root.is_dir():
        raise WorkspaceMissing(f"workspace {workspace} does not exist or is not a folder")
    return root.resolve()


def resolve_in_workspace(workspace: str, raw_path: str) -> Path:
    if not isinstance(raw_path, str) or not raw_path.strip():
        raise PathOutsideWorkspace("path must be a non-empty string")
    if "\x00" in raw_path:
        raise PathOutsideWorkspace("path contains a NUL byte")
    root = workspace_root(workspace)
    candidate = Path(raw_path)
    if not candidate.is_absolute():
        candidate = root / candidate
    # resolve() follows symlinks, including a final component that is a symlink, so a link to
    # /etc/passwd inside the workspace resolves outside it and is refused.
    try:
        resolved = candidate.resolve()
    except (RuntimeError, OSError) as err:
        # A symlink loop (RuntimeError before Python 3.13), a name too long: the model's to
        # hear, not the run's end.
        raise PathOutsideWorkspace(f"path {raw_path!r} cannot be resolved: {err}") from err
    if resolved != root and not resolved.is_relative_to(root):
        raise PathOutsideWorkspace(
            f"path {raw_path!r} is outside the workspace ({root}); tools may only touch files "
            "inside it"
        )
    return resolved


def display_path(workspace: str, path: Path) -> str:
    root = Path(workspace).resolve()
    try:
        return str(path.relative_to(root)) or "."
    except ValueError:
        return str(path)
