"""The dev server's files are its user's only: the database (with its -wal and -shm), the state
file and the log are 0600, as the README says of data files."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.harness import Deployment


async def test_the_dev_servers_files_are_0600(server: object, shared: Deployment) -> None:
    data_dir: Path = server.data_dir  # type: ignore[attr-defined]
    db = data_dir / "temporal.db"
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm"), data_dir / "temporal-dev.json"]
    files += [data_dir / "temporal-dev.log"]
    present = [f for f in files if f.exists()]
    assert db in present and data_dir / "temporal-dev.json" in present
    modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in present}
    assert set(modes.values()) == {"0o600"}, modes
    assert oct(stat.S_IMODE(data_dir.stat().st_mode)) == "0o700"
