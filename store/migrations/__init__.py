"""Versioned schema migrations, one folder per SQL dialect: `NNNN_what.sql`, applied in order,
each in one transaction, recorded in `schema_migrations` (version, applied at)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: list[str]


def split_statements(sql: str) -> list[str]:
    """The statements of a migration file (no `;` inside strings or bodies in these files)."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def load(dialect: str) -> list[Migration]:
    folder = resources.files(__package__).joinpath(dialect)
    found = []
    for item in folder.iterdir():
        match = _NAME.match(item.name)
        if match:
            found.append(
                Migration(int(match.group(1)), item.name, split_statements(item.read_text()))
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{dialect} migrations are not numbered 1..n: {versions}")
    return found


def latest(dialect: str) -> int:
    return len(load(dialect))
