"""Real parts for tests: a Temporal dev server and worker processes, started and killed here."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent


def load_devserver() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "agentlane_devserver_tests", REPO / "temporal-dev" / "devserver.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


devserver = load_devserver()


@dataclass
class WorkerProcess:
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(timeout=5)


@dataclass
class Deployment:
    """One data folder + one dev server + the workers serving one task queue."""

    data_dir: Path
    server: object
    task_queue: str
    extra_env: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)
    # The source tree the workers run (a benchmark runs an older commit's beside this one).
    repo: Path = REPO

    @property
    def address(self) -> str:
        return str(self.server.address)  # type: ignore[attr-defined]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            AGENTLANE_DATA_DIR=str(self.data_dir),
            AGENTLANE_TEMPORAL_ADDRESS=self.address,
            AGENTLANE_TASK_QUEUE=self.task_queue,
            AGENTLANE_LOG_LEVEL="WARNING",
            PYTHONPATH=str(self.repo),
        )
        env.update(self.extra_env)
        return env

    def settings_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env().items() if k.startswith("AGENTLANE_")}

    def start_worker(self, wait_ready: float = 30) -> WorkerProcess:
        log = self.data_dir / f"worker-{len(self.workers)}-{uuid.uuid4().hex[:6]}.log"
        out = log.open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "workers.main"],
            cwd=self.repo,
            env=self.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        worker = WorkerProcess(proc, log)
        self.workers.append(worker)
        deadline = time.monotonic() + wait_ready
        while time.monotonic() < deadline:
            if b"ready" in log.read_bytes():
                return worker
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        raise RuntimeError(f"worker not ready in {wait_ready}s: {log.read_text()[-2000:]}")

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers.clear()
