"""Fixtures: a real Temporal dev server for the test session, worker processes per deployment,
and a client. Nothing about Temporal is mocked."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentlane.settings import Settings
from clients.api import AgentlaneClient
from tests.harness import Deployment, devserver
from tests.postgres_cluster import PostgresCluster, shared_cluster, unavailable_reason

# Seconds each test file took in a full run (refreshed by `python -m tests.file_seconds`).
# `./dev test` runs files whole on three processes in collection order
# (`--no-loadscope-reorder`): longest first, so no process starts a two-minute file while the
# others are already done.
_FILE_SECONDS = json.loads((Path(__file__).parent / "file_seconds.json").read_text())
# A file not measured yet: a new end-to-end file is likely slow, so it goes among the early ones.
_UNMEASURED_E2E_SECONDS = 30
_UNMEASURED_SECONDS = 1


def file_seconds(path: str) -> float:
    known = _FILE_SECONDS.get(path)
    if known is not None:
        return float(known)
    return _UNMEASURED_E2E_SECONDS if path.startswith("tests/e2e/") else _UNMEASURED_SECONDS


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Stable: the tests within a file keep their order.
    items.sort(key=lambda item: -file_seconds(item.nodeid.split("::", 1)[0]))


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    data = tmp_path_factory.mktemp("temporal")
    srv = devserver.DevServer(data_dir=data, port=devserver.free_port(), ui_port=None)
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A throw-away PostgreSQL server for the test session, shared with the store's contract
    tests (skips, saying why, where none can be made: `./dev` installs Debian's `postgresql`
    package when it can)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    cluster = shared_cluster()
    yield cluster
    cluster.destroy()


def make_deployment(server: object, root: Path, **extra_env: str) -> Deployment:
    return Deployment(
        data_dir=root,
        server=server,
        task_queue=f"tq-{uuid.uuid4().hex[:8]}",
        extra_env=dict(extra_env),
    )


@pytest.fixture(scope="session")
def shared(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """One worker process shared by the tests that do not kill anything."""
    dep = make_deployment(server, tmp_path_factory.mktemp("shared"))
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest.fixture
def solo(server: object, tmp_path: Path) -> Iterator[Deployment]:
    """One worker process on a task queue of its own: for a test that kills or stops it."""
    dep = make_deployment(server, tmp_path)
    dep.start_worker()
    yield dep
    dep.stop_workers()


def settings_for(dep: Deployment) -> Settings:
    saved = dict(os.environ)
    try:
        os.environ.update(dep.settings_env())
        return Settings.from_env()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest_asyncio.fixture(scope="session")
async def client(shared: Deployment) -> AsyncIterator[AgentlaneClient]:
    yield await AgentlaneClient.connect(settings_for(shared))


@pytest.fixture(scope="session")
def hooked(server: object, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A deployment whose config lets webhooks reach loopback receivers
    (`[webhooks] allow_private = true`); the shared one refuses them, as a default install does."""
    root = tmp_path_factory.mktemp("hooked")
    (root / "config.toml").write_text("[webhooks]\nallow_private = true\n")
    dep = make_deployment(server, root)
    dep.start_worker()
    yield dep
    dep.stop_workers()


@pytest_asyncio.fixture(scope="session")
async def hooked_client(hooked: Deployment) -> AsyncIterator[AgentlaneClient]:
    yield await AgentlaneClient.connect(settings_for(hooked))


@pytest.fixture
def workspace(shared: Deployment) -> Path:
    path = shared.data_dir / "ws" / uuid.uuid4().hex[:8]
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("alpha line\nbeta line\ngamma\n")
    return path


@pytest.fixture
def session_key() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
