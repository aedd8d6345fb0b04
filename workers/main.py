"""The worker process: hosts the workflows, the model-call activity (its own task queue: the
global lane) and the tool activities.

Run several of these (on one machine or many) for capacity and for fast takeover: when one dies,
another picks up its activities after the heartbeat timeout and its workflows after the sticky
schedule-to-start timeout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Interceptor, Worker

from activities.approval_steps import ApprovalSteps
from activities.context.compaction import CompactionActivity
from activities.context.truncation import TruncationActivity
from activities.known_secrets import KnownSecrets
from activities.liveness import HEARTBEAT_THROTTLE
from activities.model_call import ModelCallActivity
from activities.process_stop import ProcessStop
from activities.profile_listing import ProfileListing, SharedCooldowns
from activities.providers.resolve import ProviderResolver
from activities.queue_drops import QueueDropActivities
from activities.queue_peers import QueuePeers
from activities.run_finish import AnnouncementPublisher, RunFinishActivity
from activities.scheduled_delivery import ScheduledDelivery
from activities.session_records import SessionRecords
from activities.session_tree import SessionTreeActivities
from activities.stream_publishers import SessionPublishers
from activities.subagent_calls import SubagentActivities
from activities.tool_calls import ToolActivities
from activities.tool_policy_reader import ToolPolicyReader
from activities.tools import orphans, process_tool, spawn
from activities.transcript_store import TranscriptStore
from activities.webhook_delivery import WebhookDelivery
from agentlane.config import ConfigWatcher
from agentlane.data_converter import LocalFileStorageDriver
from agentlane.encryption import EncryptionConfigError, codec_from_env
from agentlane.payload_gc import collect_forever
from agentlane.private_files import make_private_dir
from agentlane.run_records import engine_task_queue
from agentlane.scheduled_runs import MAX_CONCURRENT_SCHEDULED_WAITS, schedules_task_queue
from agentlane.settings import Settings
from agentlane.temporal_client import connect, mark_encryption
from agentlane.tool_calls import worker_task_queue
from agentlane.webhook_secrets import WebhookSecretStore
from agentlane.webhooks import MAX_CONCURRENT_DELIVERIES, webhook_task_queue
from clients.api import AgentlaneClient, SendRejected
from clients.identities import ClientsByIdentity
from store.file_import import warn_unimported
from store.interface import Store, StoreError
from store.open import shared_store
from workers.activation_executor import activation_executor
from workers.gc_tuning import freeze_startup_heap
from workers.in_flight import InFlight
from workers.malloc_tuning import limit_arenas, start_trimming
from workers.memory_trace import MemoryTraceConfigError
from workers.memory_trace import start_from_env as start_memory_trace
from workers.sandbox import sandbox_mode_from_env, workflow_runner
from workers.telemetry import Telemetry, TelemetryConfigError
from workers.telemetry import setup as setup_telemetry
from workflows.agent_run import AgentRunWorkflow
from workflows.scheduled_message import ScheduledMessageWorkflow
from workflows.session import SessionWorkflow
from workflows.session_events import SessionEventsWorkflow

log = logging.getLogger("agentlane.worker")

WORKFLOWS: Sequence[type] = (
    SessionWorkflow,
    AgentRunWorkflow,
    SessionEventsWorkflow,
    ScheduledMessageWorkflow,
)


# A run's finish (the engine's bookkeeping queue): one per run ending at once; short.
ENGINE_ACTIVITY_SLOTS = 64

# How long a stopping worker may spend sending the events its activities left behind.
PUBLISHERS_CLOSE_TIMEOUT_SECONDS = 10.0
# A stop, from SIGTERM to exit, takes at most 30 s at any load. Activities get
# GRACEFUL_SHUTDOWN to end by themselves, then are cancelled; the SDK's shutdown gets
# SHUTDOWN_LIMIT_SECONDS in all, then what is still running is cut short (named in the log, exit
# status EXIT_CUT_SHORT): the server gives those activities to another worker after their
# heartbeat timeout, and those workflows after the sticky timeout. HARD_EXIT_SECONDS is the
# backstop for a stop that hangs anywhere else (even with the event loop stuck).
GRACEFUL_SHUTDOWN = timedelta(seconds=5)
SHUTDOWN_LIMIT_SECONDS = 15.0
HARD_EXIT_SECONDS = 28.0
EXIT_CUT_SHORT = 3
# Calls about this worker's background processes at once (8 a session; polls wait a minute at
# most).
MAX_PROCESS_CALLS = 64


def build_workers(
    client: Client,
    settings: Settings,
    publishers: SessionPublishers,
    interceptors: Sequence[Interceptor] = (),
    *,
    state: Store,
) -> list[Worker]:
    """`publishers` is this process's one pool: every activity of a session publishes through the
    same buffer, which is what keeps their events in order. `state`: the store (store/)."""
    mode = sandbox_mode_from_env()
    store = TranscriptStore(state, settings.transcripts_dir, settings.transcript_cache_bytes)
    resolver = ProviderResolver(settings, store=state)
    model = ModelCallActivity(store, resolver, settings, publishers, SharedCooldowns(state))
    compaction = CompactionActivity(store, resolver, publishers)
    truncation = TruncationActivity(store, resolver)
    # Workspaces per host: tool outcomes name this host, so sessions pin their tools here.
    tools = ToolActivities(
        store,
        publishers,
        settings.host_id if settings.workspaces == "host" else None,
        # Kept out of tool previews and heartbeats: profile keys, secret-named env variables.
        KnownSecrets(settings, state),
        data_dir=settings.data_dir,
    )
    subagents = SubagentActivities(store, publishers, settings)
    stopping = ProcessStop(store)
    finish = RunFinishActivity(store, publishers)
    records = SessionRecords(state)
    tree = SessionTreeActivities(store, records, publishers)
    drops = QueueDropActivities(store, publishers)
    listing = ProfileListing(settings, state)
    config = ConfigWatcher(settings.data_dir)
    webhooks = WebhookDelivery(
        store, WebhookSecretStore(settings, state), policy=lambda: config.current().webhooks
    )
    # A schedule's firing reaches its session the way a chat adapter does: through the client.
    sessions = AgentlaneClient(client, settings)
    scheduled = ScheduledDelivery(
        sessions, rejected=(SendRejected,), as_identity=ClientsByIdentity(sessions)
    )
    process_queue = worker_task_queue(settings.workflow_task_queue, process_tool.WORKER_ID)
    process_tool.set_worker_queue(process_queue)
    common = dict(
        sticky_queue_schedule_to_start_timeout=settings.sticky_schedule_to_start,
        # Cancellation reaches an activity only with a heartbeat's answer (activities/liveness).
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        graceful_shutdown_timeout=GRACEFUL_SHUTDOWN,
        interceptors=list(interceptors),
    )
    return [
        # Tool activities share the workflows' task queue so the server can hand them to this
        # worker eagerly, with the workflow task's completion, instead of through another poll.
        Worker(
            client,
            task_queue=settings.workflow_task_queue,
            workflows=list(WORKFLOWS),
            workflow_runner=workflow_runner(mode),
            workflow_task_executor=activation_executor(
                mode, settings.max_concurrent_workflow_tasks
            ),
            max_cached_workflows=settings.max_cached_workflows,
            # Payloads go to and come from external storage one at a time within a workflow
            # task. With the SDK's default (3 at once) every payload of every activation is
            # visited in a task of its own, gathered at the end, though almost none is offloaded
            # (only those over the 128 KB threshold): six tasks a step spent on nothing. An
            # activation holding several offloaded payloads reads them in turn instead.
            max_workflow_task_external_storage_concurrency=1,
            activities=[
                *tools.all(),
                subagents.spawn_read,
                subagents.spawn_record,
                finish.finish_run,
                finish.run_spent,
                records.restore_session,
                records.record_session,
                tree.reset_session,
                tree.copy_branch,
                drops.record_dropped_messages,
                listing.list_profiles,
                listing.update_profile_usage,
                ToolPolicyReader(config).read_tool_policy,
                AnnouncementPublisher(publishers).publish_announcements,
                ApprovalSteps(store, publishers).approval_step,
                stopping.list_process_owners,
            ],
            max_concurrent_workflow_tasks=settings.max_concurrent_workflow_tasks,
            max_concurrent_activities=settings.max_concurrent_tool_calls,
            **common,  # type: ignore[arg-type]
        ),
        # The engine's own bookkeeping (a run's finish), in slots of its own: long tool calls
        # in the slots above do not hold up every run's end (agentlane/run_records.py).
        Worker(
            client,
            task_queue=engine_task_queue(settings.workflow_task_queue),
            activities=[finish.finish_run],
            max_concurrent_activities=ENGINE_ACTIVITY_SLOTS,
            **common,  # type: ignore[arg-type]
        ),
        # This host's own queue: the tool calls of the sessions whose workspace is on its disk
        # (workflows/policy/host_routing.py). Polled with shared workspaces too, so sessions
        # pinned before a switch still find their host.
        Worker(
            client,
            task_queue=settings.host_task_queue,
            # The tool calls, and the listing of the background processes those started (their
            # records are on this host's disk) when a session is reset or closed.
            activities=[*tools.all(), stopping.list_process_owners],
            max_concurrent_activities=settings.max_concurrent_tool_calls,
            **common,  # type: ignore[arg-type]
        ),
        Worker(
            client,
            task_queue=settings.model_task_queue,
            # Compaction calls a summariser model: it shares the model calls' slots.
            activities=[
                model.call_model,
                compaction.compact_context,
                truncation.truncate_tool_results,
            ],
            max_concurrent_activities=settings.max_concurrent_model_calls,
            **common,  # type: ignore[arg-type]
        ),
        # The sub-agent lane (workflows/subagents.py): sub-agents' model calls, in slots of
        # their own, so a fan-out neither waits for nor crowds out the sessions' own runs.
        Worker(
            client,
            task_queue=settings.subagent_model_task_queue,
            activities=[model.call_model],
            max_concurrent_activities=settings.max_concurrent_subagent_model_calls,
            **common,  # type: ignore[arg-type]
        ),
        # Calls about a background process this worker holds (activities/tools/process_tool.py)
        # come to this worker alone, on its own queue.
        Worker(
            client,
            task_queue=process_queue,
            activities=[tools.tool_process, stopping.stop_session_processes],
            max_concurrent_activities=MAX_PROCESS_CALLS,
            **common,  # type: ignore[arg-type]
        ),
        # Webhook deliveries follow a run and mostly wait (activities/webhook_delivery.py).
        Worker(
            client,
            task_queue=webhook_task_queue(settings.workflow_task_queue),
            activities=[webhooks.deliver_webhooks],
            max_concurrent_activities=MAX_CONCURRENT_DELIVERIES,
            **common,  # type: ignore[arg-type]
        ),
        # Scheduled firings send their message, then wait for its run (clients/schedules.py).
        Worker(
            client,
            task_queue=schedules_task_queue(settings.workflow_task_queue),
            activities=[scheduled.deliver_scheduled_message, scheduled.await_scheduled_run],
            max_concurrent_activities=MAX_CONCURRENT_SCHEDULED_WAITS,
            **common,  # type: ignore[arg-type]
        ),
    ]


def start_payload_gc(client: Client, settings: Settings, state: Store) -> asyncio.Task[None] | None:
    """Offloaded payloads nothing can read any more are removed on a timer (payload_gc.py)."""
    if settings.payload_gc_interval.total_seconds() <= 0:
        return None
    return asyncio.create_task(
        collect_forever(
            client,
            state,
            LocalFileStorageDriver(settings.payloads_dir),
            interval=settings.payload_gc_interval,
            grace=settings.payload_grace,
            retention=settings.payload_retention,
        )
    )


async def _reap_orphans_forever() -> None:
    """Commands (and what they started) of workers on this host that were killed: stopped at
    once and then every few seconds (activities/tools/orphans.py)."""
    while True:
        try:
            await asyncio.to_thread(orphans.reap_orphans, spawn.live_calls)
        except Exception as err:  # noqa: BLE001 - a scan that failed is tried again
            log.warning("could not look for orphaned commands: %s", err)
        await asyncio.sleep(orphans.REAP_INTERVAL_SECONDS)


async def _connect_patiently(settings: Settings, telemetry: Telemetry) -> Client:
    """The Temporal client, waiting for a server that is restarting (a supervisor restarting a
    worker during a server restart): a worker that exits leaves its host's sessions waiting
    until someone starts it. Up to `AGENTLANE_CONNECT_WAIT_S` (300 s), then the error."""
    waited, pause = 0.0, 0.5
    limit = float(os.environ.get("AGENTLANE_CONNECT_WAIT_S", "300"))
    while True:
        try:
            return await connect(
                settings,
                plugins=telemetry.plugins,
                runtime=telemetry.runtime,
                interceptors=telemetry.client_interceptors,
            )
        except RuntimeError as err:  # the SDK's "failed client connect"
            if waited >= limit:
                raise
            log.warning(
                "cannot reach the Temporal server at %s (%s); trying again in %.0f s",
                settings.temporal_address,
                str(err).splitlines()[0][:200],
                pause,
            )
            await asyncio.sleep(pause)
            waited += pause
            pause = min(pause * 2, 10.0)


async def run_worker(settings: Settings, ready: asyncio.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (exit status 0) or until a worker stops by itself (1: logged, so
    a supervisor restarts the process and an operator can see why)."""
    make_private_dir(settings.data_dir)
    memory_trace = start_memory_trace()
    trimming = start_trimming()
    telemetry = setup_telemetry(settings.metrics_address)
    client = await _connect_patiently(settings, telemetry)
    if codec_from_env(settings.encryption_env()) is not None:
        await mark_encryption(client, settings.workflow_task_queue)
    peers = QueuePeers(client, settings.workflow_task_queue)
    publishers = SessionPublishers(settings.stream_batch_interval, peers=peers)
    state = await shared_store(settings)
    await warn_unimported(settings, state)
    in_flight = InFlight()
    workers = build_workers(
        client, settings, publishers, [*telemetry.interceptors, in_flight], state=state
    )
    stop = asyncio.Event()
    hurry = asyncio.Event()
    _on_stop_signals(stop, hurry, in_flight)
    tasks = [asyncio.create_task(w.run()) for w in workers]
    gc = start_payload_gc(client, settings, state)
    watching = asyncio.create_task(peers.watch(), name="queue peers")
    reaping = asyncio.create_task(_reap_orphans_forever(), name="orphaned commands")
    log.info(
        "worker %s up on %s (queues %s, %s, %s; host %s, workspaces %s, sandbox %s)",
        os.getpid(),
        settings.temporal_address,
        settings.workflow_task_queue,
        settings.model_task_queue,
        settings.host_task_queue,
        settings.host_id,
        settings.workspaces,
        sandbox_mode_from_env(),
    )
    log.debug("%d objects of the start frozen", freeze_startup_heap())
    print(f"agentlane worker pid={os.getpid()} host={settings.host_id} ready", flush=True)
    if ready:
        ready.set()
    done, _ = await asyncio.wait(
        [*tasks, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    status = 0
    queues: dict[asyncio.Task[Any], str] = {
        task: worker.task_queue for task, worker in zip(tasks, workers, strict=True)
    }
    for task in done:
        if task not in queues:
            log.info("worker %s stopping on a signal", os.getpid())
            continue
        status = 1
        queue = queues[task]
        if task.exception():
            log.error("the worker for %s stopped: %r", queue, task.exception())
        else:
            log.error("the worker for %s stopped by itself; exiting", queue)
    for background in (gc, memory_trace, trimming, watching, reaping):
        if background is not None:
            background.cancel()
    started = time.monotonic()
    cut_short = not await _shut_down(workers, hurry)
    if cut_short:
        log.error(
            "worker %s stop cut short after %.1f s; still running: %s (they resume on another "
            "worker after their heartbeat timeout, or when this one restarts)",
            os.getpid(),
            time.monotonic() - started,
            in_flight.describe(),
        )
        status = EXIT_CUT_SHORT
    killed = spawn.kill_all()
    if killed:
        log.warning("stopped %d exec commands still running", killed)
    # Activities no longer wait for their events on success; send what they left.
    try:
        async with asyncio.timeout(PUBLISHERS_CLOSE_TIMEOUT_SECONDS):
            await publishers.close()
    except TimeoutError:
        log.warning("stopped with events not sent to the stream")
    telemetry.shutdown()
    if not cut_short:
        log.info("worker %s stopped (%.1f s)", os.getpid(), time.monotonic() - started)
    if cut_short:
        # `asyncio.run` would now wait for the SDK's shutdown it cancels: that wait is the hang.
        _exit_now(status)
    return status


def _exit_now(status: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(status)


async def _shut_down(workers: Sequence[Worker], hurry: asyncio.Event) -> bool:
    """The SDK's graceful shutdown, bounded; False when it was cut short (time or a 2nd signal).

    Not cancelled when cut short: the process exits right after."""

    async def stop_all() -> None:
        await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)

    stopping = asyncio.create_task(stop_all())
    hurried = asyncio.create_task(hurry.wait())
    await asyncio.wait(
        [stopping, hurried], timeout=SHUTDOWN_LIMIT_SECONDS, return_when=asyncio.FIRST_COMPLETED
    )
    hurried.cancel()
    return stopping.done()


def _on_stop_signals(stop: asyncio.Event, hurry: asyncio.Event, in_flight: InFlight) -> None:
    """SIGTERM/SIGINT stops the worker; a second one cuts the stop short at once.

    `signal.signal`, not the loop's handlers: a Python handler also runs while the loop's thread
    is stuck in a call that retries on EINTR, and it arms the backstop timer, which needs no
    loop at all."""
    loop = asyncio.get_running_loop()
    if threading.current_thread() is not threading.main_thread():
        return

    signalled = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal signalled
        if signalled:
            loop.call_soon_threadsafe(hurry.set)
            return
        signalled = True
        backstop = threading.Timer(HARD_EXIT_SECONDS, _hard_exit, args=(in_flight,))
        backstop.daemon = True
        backstop.start()
        loop.call_soon_threadsafe(stop.set)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def _hard_exit(in_flight: InFlight) -> None:
    try:
        running = in_flight.describe()
    except RuntimeError:  # changed while read from this thread
        running = "unknown"
    log.error(
        "worker %s did not stop within %.0f s of the signal; exiting now (still running: %s)",
        os.getpid(),
        HARD_EXIT_SECONDS,
        running,
    )
    spawn.kill_all()
    _exit_now(EXIT_CUT_SHORT)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(
        level=os.environ.get("AGENTLANE_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = Settings.from_env()
        sandbox_mode_from_env()  # an unknown mode stops the worker here, with its name
        # Before the SDK starts its threads: glibc makes its arenas as threads first allocate.
        limit_arenas()
    except ValueError as err:
        print(f"agentlane worker: {err}", file=sys.stderr, flush=True)
        os._exit(2)
    try:
        status = asyncio.run(run_worker(settings))
    except (
        EncryptionConfigError,
        TelemetryConfigError,
        StoreError,
        MemoryTraceConfigError,
    ) as err:
        print(f"agentlane worker: {err}", file=sys.stderr, flush=True)
        os._exit(2)
    sys.stdout.flush()
    sys.stderr.flush()
    # Short-lived processes using the SDK can crash at interpreter exit (sdk-python#300).
    os._exit(status)


if __name__ == "__main__":
    main()
