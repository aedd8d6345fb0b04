"""A throw-away PostgreSQL server for tests and benchmarks: Debian's `postgresql` binaries,
`initdb` in a temporary folder, `pg_ctl start` on a free port (TCP on 127.0.0.1 and a unix
socket in the same folder), stopped and removed at the end.

PostgreSQL refuses to run as root, so when this process is root the folder is handed to the
`postgres` user and every server command runs as that user (`runuser`, else `su`). The server
trusts local connections (it listens on loopback only and lives for one test run), so a URL is
`postgresql://postgres@127.0.0.1:<port>/<db>` with no password.

    cluster = PostgresCluster.create()          # or: with PostgresCluster.create() as cluster:
    url = cluster.create_database("agentlane")
    ...
    cluster.restart()                           # a server restart mid-run (tests do this)
    cluster.destroy()

`unavailable_reason()` says why none can be made here (no binaries, no `postgres` user), so a
test can skip with that reason; `./dev` installs the package where it is missing.
"""

from __future__ import annotations

import atexit
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

SUPERUSER = "postgres"


def find_bin_dir() -> Path | None:
    """The newest `/usr/lib/postgresql/<major>/bin` holding `initdb` and `pg_ctl`, else the
    folder of an `initdb` on PATH."""
    candidates: list[tuple[int, Path]] = []
    root = Path("/usr/lib/postgresql")
    if root.is_dir():
        for child in root.iterdir():
            bin_dir = child / "bin"
            if re.fullmatch(r"\d+", child.name) and (bin_dir / "initdb").exists():
                candidates.append((int(child.name), bin_dir))
    if candidates:
        return max(candidates)[1]
    on_path = shutil.which("initdb")
    if on_path:
        bin_dir = Path(on_path).resolve().parent
        if (bin_dir / "pg_ctl").exists():
            return bin_dir
    return None


def _run_as_user() -> str | None:
    """The user the server runs as: `postgres` when we are root, else ourselves (None)."""
    return SUPERUSER if os.geteuid() == 0 else None


def unavailable_reason() -> str | None:
    """None when a cluster can be made here, else why not (a skip reason)."""
    if find_bin_dir() is None:
        return (
            "PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb): "
            "install Debian's `postgresql` package (./dev does this as root)"
        )
    if _run_as_user() is not None:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "running as root but there is no `postgres` user to run the server as"
        if not (shutil.which("runuser") or shutil.which("su")):
            return "running as root with neither `runuser` nor `su` to drop to `postgres`"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (run ./dev setup)"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresCluster:
    """One server in its own temporary folder. Not thread-safe; one per test session."""

    def __init__(self, root: Path, bin_dir: Path, port: int, *, fsync: bool) -> None:
        self.root = root
        self.bin_dir = bin_dir
        self.port = port
        self.fsync = fsync
        self.data = root / "data"
        self.socket_dir = root / "sock"
        self.log = root / "server.log"
        self._user = _run_as_user()
        self._running = False

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(cls, *, port: int | None = None, fsync: bool = False) -> PostgresCluster:
        """initdb + start. `fsync=False` suits tests (the data is thrown away and a restart is
        a clean shutdown); a benchmark that measures commit latency passes True."""
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        bin_dir = find_bin_dir()
        assert bin_dir is not None
        root = Path(tempfile.mkdtemp(prefix="agentlane-pg-"))
        cluster = cls(root, bin_dir, port or free_port(), fsync=fsync)
        atexit.register(cluster.destroy)
        try:
            cluster._init()
            cluster.start()
        except BaseException:
            cluster.destroy()
            raise
        return cluster

    def _init(self) -> None:
        self.socket_dir.mkdir()
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._pg(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-instructions",
            *([] if self.fsync else ["--no-sync"]),
        )
        # Settings for a short-lived server with a few worker processes and pools on it.
        conf = [
            "listen_addresses = '127.0.0.1'",
            f"port = {self.port}",
            f"unix_socket_directories = '{self.socket_dir}'",
            "max_connections = 300",
            "shared_buffers = 64MB",
            f"fsync = {'on' if self.fsync else 'off'}",
            f"synchronous_commit = {'on' if self.fsync else 'off'}",
            "full_page_writes = off" if not self.fsync else "",
            "log_min_messages = warning",
        ]
        with (self.data / "postgresql.conf").open("a") as f:
            f.write("\n# agentlane test cluster\n" + "\n".join(c for c in conf if c) + "\n")

    def start(self, timeout: float = 60) -> None:
        self._pg(
            "pg_ctl",
            "start",
            "-w",
            "-t",
            str(int(timeout)),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
        )
        self._running = True

    def stop(self, mode: str = "fast") -> None:
        """`fast` ends sessions and shuts down cleanly; `immediate` is a crash (recovery on the
        next start)."""
        if not self._running:
            return
        self._pg("pg_ctl", "stop", "-w", "-m", mode, "-D", str(self.data), check=False)
        self._running = False

    def restart(self, down_for: float = 0.0, mode: str = "fast") -> None:
        """Stop, stay down `down_for` seconds, start again on the same port and data."""
        self.stop(mode)
        if down_for:
            time.sleep(down_for)
        self.start()

    def destroy(self) -> None:
        """Stop the server and remove its folder (idempotent; also runs at exit)."""
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.destroy()

    # -- databases ---------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new empty database; returns its URL."""
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"database name {name!r}: use lowercase letters, digits, _")
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    # -- helpers -----------------------------------------------------------------------------

    def _pg(self, program: str, *args: str, check: bool = True) -> None:
        cmd = [str(self.bin_dir / program), *args]
        if self._user is not None:
            if shutil.which("runuser"):
                cmd = ["runuser", "-u", self._user, "--", *cmd]
            else:
                cmd = ["su", self._user, "-s", "/bin/sh", "-c", " ".join(_quote(c) for c in cmd)]
        done = subprocess.run(
            cmd,
            cwd=self.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{program} failed ({done.returncode}): {done.stdout.decode()[-2000:]}\n{tail}"
            )


_shared: PostgresCluster | None = None


def shared_cluster() -> PostgresCluster:
    """This test process's one cluster, made on first use and removed at exit; raises
    RuntimeError (with `unavailable_reason()`) where none can be made."""
    global _shared
    if _shared is None:
        _shared = PostgresCluster.create()
    return _shared


def database_for(cluster: PostgresCluster, place: str) -> str:
    """The URL of a database named after `place` (a test's tmp folder): created on first use,
    the same one after, so two store objects for one place share it."""
    import hashlib

    import psycopg

    name = "t_" + hashlib.sha1(place.encode()).hexdigest()[:20]
    try:
        return cluster.create_database(name)
    except psycopg.errors.DuplicateDatabase:
        return cluster.url(name)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)
