"""Append-only transcript store: one JSONL file per session, outside workflow history.

Activities run at least once, so every append is idempotent: an entry whose id is already in
the file is skipped, and a tool result for a tool call that already has one is skipped (every
tool call ends up with exactly one result, even when a retried attempt or a zombie worker writes
again). Appends hold an exclusive file lock so two processes never interleave lines.

Reads are incremental: a process remembers how far it has parsed each file and only parses what
was appended since, so long conversations do not cost a full re-read per model call.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from activities.bounded_cache import BoundedCache
from agentlane.ids import file_safe, storage_name
from agentlane.private_files import make_private_dir, private_open, write_private
from agentlane.run import UserTurn
from agentlane.transcript import Role, ToolCall, TranscriptEntry, unanswered_text


class TranscriptCorrupt(Exception):
    pass


def user_entries(turns: list[UserTurn], run_id: str, now: float) -> list[TranscriptEntry]:
    """The transcript entries of user turns a run received (ids from the session)."""
    return [
        TranscriptEntry(
            id=turn.entry_id,
            role=Role.USER,
            ts=now,
            run_id=run_id,
            text=turn.text,
            meta={"sender": turn.sender} if turn.sender else {},
        )
        for turn in turns
    ]


def tool_result_entry(
    tool_call_id: str,
    tool_name: str,
    text: str,
    run_id: str | None,
    *,
    is_error: bool,
    ts: float | None = None,
    meta: dict[str, Any] | None = None,
) -> TranscriptEntry:
    """The one way a tool result entry is made; its id derives from the call id."""
    return TranscriptEntry(
        id=f"{tool_call_id}:result",
        role=Role.TOOL,
        ts=time.time() if ts is None else ts,
        run_id=run_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        text=text,
        is_error=is_error,
        meta=meta or {},
    )


@dataclass
class _Parsed:
    offset: int = 0
    entries: list[TranscriptEntry] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    answered: set[str] = field(default_factory=set)
    # Kept as entries are parsed, so a run's end never walks the whole transcript: the
    # positions of each run's entries, and the tool calls still without a result.
    by_run: dict[str, list[int]] = field(default_factory=dict)
    unanswered: dict[str, ToolCall] = field(default_factory=dict)
    # Lines that are not entries (garbage, a foreign write, a crash mid-line): byte offset and
    # why. They stay in the file, which is only ever appended to.
    skipped: list[tuple[int, str]] = field(default_factory=list)


log = logging.getLogger(__name__)


OWNER_FILE = ".key"
# How many sessions' parsed transcripts (and folder names) one worker process keeps in memory.
PARSED_SESSIONS_KEPT = 256
SESSION_DIRS_KEPT = 4096


class TranscriptStore:
    def __init__(self, root: Path, fsync: bool = True) -> None:
        self.root = root
        self.fsync = fsync
        # Parsed transcripts of the sessions used most recently (a worker that served
        # thousands of sessions keeps only these; another is re-read from its file).
        self._cache: BoundedCache[str, _Parsed] = BoundedCache(PARSED_SESSIONS_KEPT)
        self._dirs: BoundedCache[str, Path] = BoundedCache(SESSION_DIRS_KEPT)
        self._lock = threading.Lock()

    def session_dir(self, key: str) -> Path:
        """The key's folder (`agentlane.ids.storage_name`), or the folder an earlier version
        wrote for it under the old, colliding name when that folder is the key's own."""
        known = self._dirs.get(key)
        if known is not None:
            return known
        found = self.root / storage_name(key)
        legacy = self.root / file_safe(key)
        if legacy != found and not found.exists() and self._owned_by(legacy, key):
            found = legacy
        self._dirs[key] = found
        return found

    @staticmethod
    def _owned_by(directory: Path, key: str) -> bool:
        """Whether an old-named folder holds `key`'s data: its owner file says so, or (written
        before owner files) its first user message's id starts with the key."""
        owner = directory / OWNER_FILE
        if owner.exists():
            return owner.read_text() == key
        try:
            with (directory / "transcript.jsonl").open("rb") as fh:
                for line in fh:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if entry.get("role") == "user":
                        return str(entry.get("id", "")).startswith(f"{key}.")
        except OSError:
            return False
        return False

    def ensure_session_dir(self, key: str) -> Path:
        directory = self.session_dir(key)
        if not directory.exists():
            # Only the project's user can read transcripts (0700 folders, 0600 files).
            make_private_dir(self.root)
            directory.mkdir(mode=0o700, exist_ok=True)
        owner = directory / OWNER_FILE
        if not owner.exists():
            write_private(owner, key.encode())
        return directory

    def path(self, key: str) -> Path:
        return self.session_dir(key) / "transcript.jsonl"

    # -- a run's context -------------------------------------------------------------------

    def _run_workspace_path(self, key: str, run_chain: str) -> Path:
        return self.session_dir(key) / "run-workspaces" / file_safe(run_chain)

    def record_run_workspace(self, key: str, run_chain: str, workspace: str) -> None:
        """Remember the workspace of one run (`run_chain`: run id and chain token), so that its
        later steps need not carry the path in their inputs, and so in history."""
        path = self._run_workspace_path(key, run_chain)
        if path.exists() and path.read_text() == workspace:
            return
        self.ensure_session_dir(key)
        write_private(path, workspace.encode())

    def run_workspace(self, key: str, run_chain: str) -> str | None:
        try:
            return self._run_workspace_path(key, run_chain).read_text()
        except FileNotFoundError:
            return None

    # -- where a run's events start in the session's stream --------------------------------

    def _stream_start_path(self, key: str) -> Path:
        return self.session_dir(key) / "stream-start"

    def record_stream_start(self, key: str, run_id: str, offset: int) -> None:
        """Remember the stream offset at which `run_id` began (one run at a time per session,
        so one small file, overwritten: it never grows with the session)."""
        self.ensure_session_dir(key)
        write_private(self._stream_start_path(key), f"{run_id} {offset}".encode())

    def stream_start(self, key: str, run_id: str) -> int | None:
        try:
            recorded, _, offset = self._stream_start_path(key).read_text().partition(" ")
        except FileNotFoundError:
            return None
        return int(offset) if recorded == run_id and offset.isdigit() else None

    # -- reading ---------------------------------------------------------------------------

    def _refresh(self, key: str) -> _Parsed:
        path = self.path(key)
        parsed = self._cache.get(key)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            self._cache[key] = _Parsed()
            return self._cache[key]
        if parsed is None or size < parsed.offset:
            parsed = _Parsed()
        if size > parsed.offset:
            with path.open("rb") as fh:
                fh.seek(parsed.offset)
                chunk = fh.read(size - parsed.offset)
            # A line without its newline is an append still in progress (or torn by a crash,
            # in which case the next append repairs it): leave it for later.
            complete = chunk[: chunk.rfind(b"\n") + 1]
            # A line that is not an entry is skipped, never fatal: one damaged line must not
            # brick a session (issue 10). It is logged with where it is, once per process.
            at = parsed.offset
            for line in complete.splitlines(keepends=True):
                if line.strip():
                    try:
                        self._index(parsed, TranscriptEntry.model_validate_json(line))
                    except ValueError as err:
                        why = " ".join(str(err).split())[:300]
                        parsed.skipped.append((at, why))
                        log.warning("%s: skipped an unreadable line at byte %d: %s", path, at, why)
                at += len(line)
            parsed.offset += len(complete)
        self._cache[key] = parsed
        return parsed

    @staticmethod
    def _index(parsed: _Parsed, entry: TranscriptEntry) -> None:
        if entry.run_id is not None:
            parsed.by_run.setdefault(entry.run_id, []).append(len(parsed.entries))
        parsed.entries.append(entry)
        parsed.ids.add(entry.id)
        if entry.role == Role.TOOL and entry.tool_call_id:
            parsed.answered.add(entry.tool_call_id)
            parsed.unanswered.pop(entry.tool_call_id, None)
        elif entry.role == Role.ASSISTANT:
            for call in entry.tool_calls:
                if call.id not in parsed.answered:
                    parsed.unanswered[call.id] = call

    def skipped_lines(self, key: str) -> list[tuple[int, str]]:
        """Lines of the session's transcript that could not be read (byte offset, why)."""
        with self._lock:
            return list(self._refresh(key).skipped)

    def read(self, key: str) -> list[TranscriptEntry]:
        with self._lock:
            return list(self._refresh(key).entries)

    def read_run(self, key: str, run_id: str) -> list[TranscriptEntry]:
        """The entries of one run, without walking the others (its cost is the run's size,
        not the session's age)."""
        with self._lock:
            parsed = self._refresh(key)
            return [parsed.entries[i] for i in parsed.by_run.get(run_id, [])]

    def get(self, key: str, entry_id: str) -> TranscriptEntry | None:
        with self._lock:
            parsed = self._refresh(key)
            if entry_id not in parsed.ids:
                return None
            return next(e for e in reversed(parsed.entries) if e.id == entry_id)

    def tool_result(self, key: str, tool_call_id: str) -> TranscriptEntry | None:
        with self._lock:
            parsed = self._refresh(key)
            if tool_call_id not in parsed.answered:
                return None
            return next(
                e
                for e in reversed(parsed.entries)
                if e.role == Role.TOOL and e.tool_call_id == tool_call_id
            )

    def last_id(self, key: str) -> str | None:
        with self._lock:
            entries = self._refresh(key).entries
            return entries[-1].id if entries else None

    def unanswered_tool_calls(self, key: str) -> list[ToolCall]:
        with self._lock:
            return list(self._refresh(key).unanswered.values())

    # -- writing ---------------------------------------------------------------------------

    def answer_unanswered(self, key: str, run_id: str, reason: str) -> list[TranscriptEntry]:
        """Answer every tool call that has no result yet, as an error result explaining `reason`
        (an `Unanswered` code, or the words themselves).

        Keeps the transcript valid (every call answered once) when calls were skipped or a run
        stopped before they ran.
        """
        now = time.time()
        return self.append(
            key,
            [
                tool_result_entry(
                    call.id, call.name, unanswered_text(reason), run_id, is_error=True, ts=now
                )
                for call in self.unanswered_tool_calls(key)
            ],
        )

    @contextmanager
    def _file_lock(self, key: str) -> Iterator[None]:
        directory = self.ensure_session_dir(key)
        with private_open(directory / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _repair_torn_tail(self, path: Path) -> None:
        if not path.exists() or path.stat().st_size == 0:
            return
        with path.open("rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return
            fh.seek(0)
            data = fh.read()
            fh.truncate(data.rfind(b"\n") + 1)

    def append(self, key: str, entries: list[TranscriptEntry]) -> list[TranscriptEntry]:
        """Append the entries not already present; return those actually written.

        Each entry's parent_id defaults to the id of the entry before it.
        """
        if not entries:
            return []
        with self._lock, self._file_lock(key):
            path = self.path(key)
            self._repair_torn_tail(path)
            parsed = self._refresh(key)
            written: list[TranscriptEntry] = []
            lines: list[bytes] = []
            last = parsed.entries[-1].id if parsed.entries else None
            batch_answered: set[str] = set()
            batch_ids: set[str] = set()
            for entry in entries:
                if entry.id in parsed.ids or entry.id in batch_ids:
                    continue
                if (
                    entry.role == Role.TOOL
                    and entry.tool_call_id
                    and (
                        entry.tool_call_id in parsed.answered
                        or entry.tool_call_id in batch_answered
                    )
                ):
                    continue
                if entry.parent_id is None:
                    entry = entry.model_copy(update={"parent_id": last})
                last = entry.id
                batch_ids.add(entry.id)
                if entry.role == Role.TOOL and entry.tool_call_id:
                    batch_answered.add(entry.tool_call_id)
                lines.append(entry.model_dump_json(exclude_defaults=True).encode() + b"\n")
                written.append(entry)
            if lines:
                with private_open(path, "ab") as fh:
                    fh.write(b"".join(lines))
                    fh.flush()
                    if self.fsync:
                        os.fsync(fh.fileno())
                self._refresh(key)
            return written
