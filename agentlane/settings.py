"""Settings for every process, from environment variables (prefix AGENTLANE_).

Secrets are not settings: provider keys live in the auth store and are read by activities only.
"""

from __future__ import annotations

import os
import re
import socket
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, SecretStr, field_validator


def model_task_queue(workflow_task_queue: str) -> str:
    """Model calls have their own queue: its worker slots are the global lane."""
    return f"{workflow_task_queue}-model"


def subagent_model_task_queue(workflow_task_queue: str) -> str:
    """Sub-agents' model calls have their own queue: its worker slots are the original's
    sub-agent lane (SPEC §2, `subagents.maxConcurrent`, 8), apart from the global lane."""
    return f"{workflow_task_queue}-subagent-model"


# A host id names a task queue and appears in status lines: a short, plain word.
HOST_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")

WorkspacesMode = Literal["host", "shared"]


def host_task_queue(workflow_task_queue: str, host_id: str) -> str:
    """The queue only the workers of one host poll: tool calls of the sessions whose workspace
    is on that host's disk go there (AGENTLANE_WORKSPACES=host)."""
    return f"{workflow_task_queue}@host:{host_id}"


def check_host_id(host_id: str) -> str:
    if not HOST_ID_PATTERN.match(host_id):
        raise ValueError(
            f"host id {host_id!r} is not valid: use letters, digits, '.', '_' or '-' "
            "(at most 100 characters, starting with a letter or digit)"
        )
    return host_id


def default_host_id() -> str:
    """The machine's name, cut to what a host id may hold."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-._") or "localhost"
    return name[:100]


def _env(name: str, default: str) -> str:
    return os.environ.get(f"AGENTLANE_{name}", default)


# Sessions' default workspaces, under a data dir.
WORKSPACES_FOLDER = "workspaces"
GATEWAY_MAX_BODY_BYTES = 2 * 1024 * 1024


class Settings(BaseModel):
    data_dir: Path
    temporal_address: str = "localhost:7233"
    namespace: str = "default"
    api_key_env: str | None = None
    tls: bool = False
    workflow_task_queue: str = "agentlane"
    # The global lane: how many model calls one worker runs at once.
    max_concurrent_model_calls: int = 4
    # Tool calls a worker runs at once. Mostly waiting (a command, a process's output), so not
    # tied to the cores: eight long `exec`s (a dev server, a `tail -f`) held up every other
    # session's tools on the worker.
    max_concurrent_tool_calls: int = 32
    # The sub-agent lane: how many sub-agents' model calls one worker runs at once.
    max_concurrent_subagent_model_calls: int = 8
    # Workflows one worker keeps in memory between their tasks (the SDK's sticky cache); one
    # that falls out is rebuilt by replaying its history on its next task. Bounds the worker's
    # memory (README "Worker"). A busy session holds three (itself, its stream, its run): at the
    # SDK's 1 000, 500 busy sessions on one worker replayed in turn and its CPU a step doubled.
    max_cached_workflows: int = 2000
    # Workflow tasks one worker runs at once (each holds a thread of the SDK's workflow executor).
    # Their Python work shares one interpreter lock, so more at once only queue inside the
    # worker, where the SDK counts the wait as task time (its 10 s timeout, TMPRL1104 past 1 s);
    # past this many they wait in the server's queue instead, where any worker can take them.
    max_concurrent_workflow_tasks: int = 10
    # Bytes of parsed transcripts one worker keeps in memory (activities/transcript_store.py).
    transcript_cache_bytes: int = 256 * 2**20
    # How long a workflow task waits on a dead worker's sticky queue before any worker takes it
    # (README "Durability and timeouts"; the activity heartbeat timeout is set by the workflows,
    # workflows/activity_options.py).
    sticky_schedule_to_start: timedelta = timedelta(seconds=2)
    stream_batch_interval: timedelta = timedelta(milliseconds=200)
    payload_offload_threshold: int = 128 * 1024
    # Offloaded payloads (agentlane/payload_gc.py): a closed workflow's go `payload_grace` after
    # it closed; those without an owner after `payload_retention`. Each worker cleans up every
    # `payload_gc_interval` (0: never; `agentlane gc` does it on demand).
    payload_grace: timedelta = timedelta(minutes=10)
    payload_retention: timedelta = timedelta(days=7)
    payload_gc_interval: timedelta = timedelta(minutes=10)
    default_model: str = "offline/planner"
    # Payload encryption (agentlane/encryption.py): off unless one of these is set.
    encryption_keys_file: str | None = None
    encryption_keys: SecretStr | None = None
    # The HTTP gateway for chat adapters (clients/gateway/, `agentlane gateway`).
    gateway_host: str = "127.0.0.1"
    gateway_port: int = 8787
    # A comment line this often on an idle event stream, so proxies keep it open.
    gateway_keepalive: timedelta = timedelta(seconds=15)
    # Request bodies above this are refused (413). A message's text is capped at 100 000
    # characters (agentlane/messages.py); JSON-escaped as ASCII (Python's `json.dumps`) a
    # character outside the BMP takes 12 bytes (`\ud83d\ude00`): 1.2 MB, under 2 MiB with room
    # for the other fields.
    gateway_max_body_bytes: int = GATEWAY_MAX_BODY_BYTES
    # Per-token token bucket: sustained requests per second, and the burst it allows.
    gateway_rate_per_second: float = 5.0
    gateway_rate_burst: int = 30
    # One upstream subscription per session shared by its SSE followers (clients/gateway/
    # fanout.py); off: each connection polls the stream itself. A follower more than
    # `gateway_fanout_queue` events behind is cut off (`lagging`) and reconnects.
    gateway_fanout: bool = True
    gateway_fanout_queue: int = 1000
    # host:port of each worker's Prometheus endpoint (workers/telemetry.py); None: no metrics.
    metrics_address: str | None = None
    # Where state outside Temporal lives (store/open.py): unset, the embedded SQLite file in the
    # data dir; `postgresql://…` for many hosts.
    database_url: str | None = None
    # Where workspaces live (README "Several hosts"): `host`, each on one host's disk, so a
    # session's tools run on the host its workspace is on; `shared`, one filesystem every worker
    # mounts, so tools run on any worker.
    workspaces: WorkspacesMode = "host"
    # This process's host: its workers poll `host_task_queue` for the tools of the sessions
    # pinned to it; a client records it for a workspace it names (and so checked on its disk).
    host_id: str = ""
    # How long a run waits for its workspace's host to come back (README "Several hosts"): what
    # the sessions this process creates get as their `host_wait_seconds`.
    host_wait_seconds: int = 600

    @field_validator("host_id")
    @classmethod
    def _host_id(cls, value: str) -> str:
        return check_host_id(value) if value else default_host_id()

    def encryption_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.encryption_keys_file:
            env["AGENTLANE_ENCRYPTION_KEYS_FILE"] = self.encryption_keys_file
        if self.encryption_keys is not None:
            env["AGENTLANE_ENCRYPTION_KEYS"] = self.encryption_keys.get_secret_value()
        return env

    @property
    def model_task_queue(self) -> str:
        return model_task_queue(self.workflow_task_queue)

    @property
    def subagent_model_task_queue(self) -> str:
        return subagent_model_task_queue(self.workflow_task_queue)

    @property
    def host_task_queue(self) -> str:
        return host_task_queue(self.workflow_task_queue, self.host_id)

    @property
    def transcripts_dir(self) -> Path:
        return self.data_dir / "sessions"

    @property
    def workspaces_dir(self) -> Path:
        return self.data_dir / WORKSPACES_FOLDER

    @property
    def payloads_dir(self) -> Path:
        return self.data_dir / "payloads"

    @property
    def gateway_tokens_file(self) -> Path:
        return self.data_dir / "gateway-tokens.json"

    @property
    def gateway_address(self) -> str:
        return f"http://{self.gateway_host}:{self.gateway_port}"

    @classmethod
    def from_env(cls) -> Settings:
        data_dir = Path(_env("DATA_DIR", str(Path.cwd() / "data"))).resolve()
        return cls(
            data_dir=data_dir,
            temporal_address=_env("TEMPORAL_ADDRESS", "localhost:7233"),
            namespace=_env("NAMESPACE", "default"),
            api_key_env=os.environ.get("AGENTLANE_TEMPORAL_API_KEY_ENV"),
            tls=_env("TEMPORAL_TLS", "0") == "1",
            workflow_task_queue=_env("TASK_QUEUE", "agentlane"),
            max_concurrent_model_calls=int(_env("MAX_MODEL_CALLS", "4")),
            max_concurrent_tool_calls=int(_env("MAX_TOOL_CALLS", "32")),
            max_concurrent_subagent_model_calls=int(_env("MAX_SUBAGENT_MODEL_CALLS", "8")),
            max_cached_workflows=int(_env("MAX_CACHED_WORKFLOWS", "2000")),
            max_concurrent_workflow_tasks=int(_env("MAX_WORKFLOW_TASKS", "10")),
            transcript_cache_bytes=int(float(_env("TRANSCRIPT_CACHE_MB", "256")) * 2**20),
            sticky_schedule_to_start=timedelta(seconds=float(_env("STICKY_TIMEOUT_S", "2"))),
            stream_batch_interval=timedelta(milliseconds=float(_env("STREAM_BATCH_MS", "200"))),
            payload_offload_threshold=int(_env("PAYLOAD_OFFLOAD_BYTES", str(128 * 1024))),
            payload_grace=timedelta(seconds=float(_env("PAYLOAD_GRACE_S", "600"))),
            payload_retention=timedelta(hours=float(_env("PAYLOAD_RETENTION_H", "168"))),
            payload_gc_interval=timedelta(seconds=float(_env("PAYLOAD_GC_INTERVAL_S", "600"))),
            default_model=_env("MODEL", "offline/planner"),
            encryption_keys_file=os.environ.get("AGENTLANE_ENCRYPTION_KEYS_FILE") or None,
            encryption_keys=(
                SecretStr(os.environ["AGENTLANE_ENCRYPTION_KEYS"])
                if os.environ.get("AGENTLANE_ENCRYPTION_KEYS")
                else None
            ),
            gateway_host=_env("GATEWAY_HOST", "127.0.0.1"),
            gateway_port=int(_env("GATEWAY_PORT", "8787")),
            gateway_keepalive=timedelta(seconds=float(_env("GATEWAY_KEEPALIVE_S", "15"))),
            gateway_max_body_bytes=int(_env("GATEWAY_MAX_BODY_BYTES", str(GATEWAY_MAX_BODY_BYTES))),
            gateway_rate_per_second=float(_env("GATEWAY_RATE_PER_S", "5")),
            gateway_rate_burst=int(_env("GATEWAY_RATE_BURST", "30")),
            gateway_fanout=_env("GATEWAY_FANOUT", "1").lower() not in ("0", "false", "no", "off"),
            gateway_fanout_queue=int(_env("GATEWAY_FANOUT_QUEUE", "1000")),
            metrics_address=os.environ.get("AGENTLANE_METRICS_ADDRESS") or None,
            database_url=os.environ.get("AGENTLANE_DATABASE_URL") or None,
            workspaces=_workspaces_mode(_env("WORKSPACES", "host")),
            host_id=_env("HOST_ID", ""),
            host_wait_seconds=int(_env("HOST_WAIT_S", "600")),
        )


def _workspaces_mode(value: str) -> WorkspacesMode:
    mode = value.strip().lower()
    if mode == "host":
        return "host"
    if mode == "shared":
        return "shared"
    raise ValueError(f"AGENTLANE_WORKSPACES is {value!r}; use host or shared")
