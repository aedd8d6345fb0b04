"""Today's file layout (the data dir before the store) into the store: `agentlane db import`.

Idempotent: every write is keyed (entry ids, run ids, digests, token ids, refs), so importing
twice, or importing into a store that already holds some of it, adds only what is missing. The
files are left where they are (read only); nothing is deleted.

What is read, under the data dir:

    sessions/<key>/transcript.jsonl   entries (unreadable lines are counted and skipped)
    sessions/<key>/session.json       the session's recorded settings
    sessions/<key>/branch.json        where the session was branched from
    sessions/<key>/runs.jsonl         finished runs
    sessions/<key>/run-workspaces/*   workspaces of runs in flight
    sessions/<key>/exec-started/*, edit-applied/*   what attempts of tool calls did
    auth.json                         auth profiles and their keys
    auth-state.json                   shared profile usage, order, last good
    gateway-tokens.json, gateway-tokens-used.json
    webhooks/secrets/<ref>

Offloaded payloads stay files (`data/payloads/`, read where they are by the `local-file`
driver, agentlane/data_converter.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentlane.ids import file_safe
from agentlane.settings import Settings
from agentlane.transcript import TranscriptEntry
from store.interface import Store
from store.models import ProfileRow, TokenRow

log = logging.getLogger(__name__)

LEGACY_MARKERS = (
    "sessions",
    "auth.json",
    "auth-state.json",
    "gateway-tokens.json",
    "webhooks/secrets",
)


@dataclass
class ImportReport:
    found: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def count(self, what: str, found: int, written: int) -> None:
        self.found[what] = self.found.get(what, 0) + found
        self.written[what] = self.written.get(what, 0) + written

    def lines(self) -> list[str]:
        out = [
            f"{what}: {self.written.get(what, 0)} imported of {n} found"
            for what, n in sorted(self.found.items())
        ]
        return out + [f"skipped: {p}" for p in self.problems]


def legacy_files(data_dir: Path) -> list[Path]:
    """The old layout's files and folders present in `data_dir` (with something in them)."""
    found = []
    for name in LEGACY_MARKERS:
        path = data_dir / name
        if path.is_file() or (path.is_dir() and any(path.iterdir())):
            found.append(path)
    return found


async def store_is_empty(store: Store) -> bool:
    counts = (await store.status()).counts
    return not any(counts.get(t) for t in counts)


async def warn_unimported(settings: Settings, store: Store, *, log_it: bool = True) -> str | None:
    """A warning (logged, and returned for `status`) when the data dir holds the old file layout
    and the store is empty: that data is not used until `agentlane db import`."""
    old = await asyncio.to_thread(legacy_files, settings.data_dir)
    if not old or not await store_is_empty(store):
        return None
    text = (
        f"{settings.data_dir} holds data in the old file layout "
        f"({', '.join(p.name for p in old)}) and the {store.backend} store is empty: that data "
        "(transcripts, records, profiles, tokens, secrets, payloads) is not used until you run "
        f"`agentlane db import --from {settings.data_dir}`"
    )
    if log_it:
        log.warning("%s", text)
    return text


def _key_of(folder: Path) -> str:
    owner = folder / ".key"
    if owner.is_file():
        return owner.read_text()
    # storage_name() escapes every other character as %XX: undo that.
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), folder.name)


def _read_lines(path: Path, report: ImportReport) -> list[bytes]:
    try:
        return [line for line in path.read_bytes().splitlines() if line.strip()]
    except OSError as err:
        report.problems.append(f"{path}: {err}")
        return []


async def _import_session(folder: Path, store: Store, report: ImportReport) -> None:
    key = _key_of(folder)
    transcript = folder / "transcript.jsonl"
    entries: list[TranscriptEntry] = []
    if transcript.is_file():
        for n, line in enumerate(_read_lines(transcript, report), start=1):
            try:
                entries.append(TranscriptEntry.model_validate_json(line))
            except ValueError:
                report.problems.append(f"{transcript}:{n}: not a transcript entry")
        written = await store.append_entries(key, entries)
        report.count("transcript entries", len(entries), len(written))
    record = folder / "session.json"
    if record.is_file():
        await store.put_session_record(key, record.read_text())
        report.count("session records", 1, 1)
    branch = folder / "branch.json"
    if branch.is_file():
        report.count(
            "branch sources", 1, int(await store.put_branch_source(key, branch.read_text()))
        )
    runs = folder / "runs.jsonl"
    if runs.is_file():
        for line in _read_lines(runs, report):
            try:
                run_id = str(json.loads(line)["run_id"])
            except (ValueError, KeyError, TypeError):
                report.problems.append(f"{runs}: a line without a run id")
                continue
            report.count("runs", 1, int(await store.record_run(key, run_id, line.decode())))
    chains = {
        file_safe(e.id.rsplit(":t", 1)[0]): e.id.rsplit(":t", 1)[0] for e in entries if ":t" in e.id
    }
    workspaces = folder / "run-workspaces"
    if workspaces.is_dir():
        for file in workspaces.iterdir():
            chain = chains.get(file.name, file.name)
            await store.set_run_workspace(key, chain, file.read_text())
            report.count("run workspaces", 1, 1)
    for kind in ("exec-started", "edit-applied"):
        marks = folder / kind
        if marks.is_dir():
            for file in marks.iterdir():
                wrote = await store.mark_tool_call(key, file.name, kind, file.read_text())
                report.count("tool-call marks", 1, int(wrote))


async def _import_auth(data_dir: Path, store: Store, report: ImportReport) -> None:
    auth = data_dir / "auth.json"
    if auth.is_file():
        profiles: dict[str, Any] = json.loads(auth.read_text() or "{}").get("profiles", {})
        for pid, spec in profiles.items():
            await store.put_profile(
                ProfileRow(
                    id=pid,
                    provider=str(spec.get("provider", "")),
                    type=str(spec.get("type", "api_key")),
                    key=spec.get("key") or None,
                    base_url=spec.get("base_url") or None,
                    auth_header=spec.get("auth_header") or None,
                    headers=dict(spec.get("headers") or {}),
                )
            )
        report.count("auth profiles", len(profiles), len(profiles))
    state = data_dir / "auth-state.json"
    if state.is_file():
        raw: dict[str, Any] = json.loads(state.read_text() or "{}")
        usage: dict[str, Any] = raw.get("usage", {})
        for pid, value in usage.items():
            wrote = await store.set_usage(pid, None, json.dumps(value))
            report.count("profile usage", 1, int(wrote))
        for provider, pid in raw.get("last_good", {}).items():
            row = await store.usage_row(pid)
            if row is not None:
                await store.set_usage(pid, row.version, row.usage, last_good_for=provider)
        orders = await store.profile_orders()
        for provider, order in raw.get("order", {}).items():
            if provider not in orders:
                await store.set_profile_order(provider, list(order))


async def _import_gateway_and_webhooks(data_dir: Path, store: Store, report: ImportReport) -> None:
    tokens = data_dir / "gateway-tokens.json"
    if tokens.is_file():
        listed = json.loads(tokens.read_text() or "{}").get("tokens", [])
        for item in listed:
            report.count("gateway tokens", 1, int(await store.add_token(TokenRow(**item))))
    used = data_dir / "gateway-tokens-used.json"
    if used.is_file():
        try:
            await store.note_token_use(dict(json.loads(used.read_text()).get("last_used", {})))
        except ValueError as err:
            report.problems.append(f"{used}: {err}")
    secrets = data_dir / "webhooks" / "secrets"
    if secrets.is_dir():
        for file in secrets.iterdir():
            if file.name.startswith("."):
                continue
            had = await store.webhook_secret(file.name)
            await store.ensure_webhook_secret(file.name, file.read_text().strip().encode())
            report.count("webhook secrets", 1, int(had is None))


async def import_files(data_dir: Path, store: Store) -> ImportReport:
    report = ImportReport()
    sessions = data_dir / "sessions"
    if sessions.is_dir():
        for folder in sorted(p for p in sessions.iterdir() if p.is_dir()):
            await _import_session(folder, store, report)
    await _import_auth(data_dir, store, report)
    await _import_gateway_and_webhooks(data_dir, store, report)
    return report
