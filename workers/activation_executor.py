"""Where the SDK runs a workflow activation: live ones on the event loop, replays on threads.

The SDK hands every activation to a thread pool and waits for it on the event loop, so that a
workflow stuck in a loop cannot hold the worker (it fails the task after two seconds). A live
activation of this project's workflows is a fraction of a millisecond of pure code, and the
hop costs more than the work: two thread wake-ups and the interpreter lock handed over twice,
twice or three times a step (bench_engine: about a tenth of the worker's CPU a step, with the
store's writes, and a millisecond and a half of a step's wall time).

So an activation that replays nothing runs where it is submitted, on the event loop's thread.
Replays (a workflow rebuilt after a restart or an eviction, possibly thousands of events) still
go to the pool: they may take long, and the event loop must keep serving heartbeats meanwhile.

The deadlock guard stays: a watchdog thread checks the activation running inline, and one still
running after the SDK's limit is interrupted the way the SDK interrupts a thread it gave up on
(an exception raised in the thread, only while the activation runs). The task fails, and Temporal
retries it like any failed workflow task. Code blocked inside one C call (a sleep, a lock) sees
the exception only when that call returns; that holds for the SDK's threads too.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from workers.sandbox import SandboxMode

log = logging.getLogger(__name__)

# The SDK's limit for an activation (temporalio.worker._workflow: 2 s unless debugging).
DEADLOCK_SECONDS = 2.0

T = TypeVar("T")


class ActivationBlocked(RuntimeError):
    """An activation that ran on the event loop longer than the limit, interrupted."""


class _Watchdog:
    """One daemon thread that looks at the activation running inline, four times a limit."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        # (sequence number, start, the SDK's running workflow) of the inline activation.
        self._running: tuple[int, float, object] | None = None
        self._seq = 0
        self._interrupted = 0
        self._thread: threading.Thread | None = None

    def begin(self, owner: object) -> int:
        with self._lock:
            self._seq += 1
            self._running = (self._seq, time.monotonic(), owner)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="agentlane-activation-watchdog", daemon=True
                )
                self._thread.start()
            return self._seq

    def end(self) -> bool:
        """True when this activation was interrupted."""
        with self._lock:
            seq = self._running[0] if self._running else 0
            self._running = None
            return seq != 0 and seq == self._interrupted

    def _watch(self) -> None:
        while True:
            time.sleep(self.limit / 4)
            with self._lock:
                running = self._running
                if running is None or running[0] == self._interrupted:
                    continue
                seq, started, owner = running
                if time.monotonic() - started < self.limit:
                    continue
                self._interrupted = seq
            log.error(
                "a workflow activation has held the event loop for over %.0f s; interrupting it",
                self.limit,
            )
            # The SDK's own interruption: it raises only while the activation still runs.
            interrupt = getattr(owner, "attempt_deadlock_interruption", None)
            if callable(interrupt):
                interrupt()


class LiveActivationsInline(ThreadPoolExecutor):
    """The `workflow_task_executor` of a worker running unsandboxed workflows."""

    def __init__(self, max_workers: int, limit: float = DEADLOCK_SECONDS) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="temporal_workflow_")
        self._watchdog = _Watchdog(limit)
        self.inline = 0
        self.threaded = 0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        loop = asyncio._get_running_loop()
        if loop is None or not _live_activation(fn, args):
            self.threaded += 1
            return super().submit(fn, *args, **kwargs)
        self.inline += 1
        done: Future[T] = Future()
        self._watchdog.begin(getattr(fn, "__self__", None))
        try:
            # A fresh context, as on a pool thread: nothing of the caller's leaks in or out.
            result = contextvars.Context().run(fn, *args, **kwargs)
        except BaseException as err:  # noqa: BLE001 - everything reaches the SDK through the future
            failure: BaseException | None = err
        else:
            failure = None
        finally:
            # The workflow instance is itself an event loop: it registers itself as the running
            # loop for its activation and clears the registration when it returns.
            asyncio._set_running_loop(loop)
        if self._watchdog.end():
            # Failed like the SDK fails one it gave up on, whatever the code did with the
            # interruption: the task is retried from the history.
            failure = ActivationBlocked(
                f"workflow activation interrupted after {self._watchdog.limit:.0f} s on the "
                "event loop"
            )
        if failure is not None:
            done.set_exception(failure)
        else:
            done.set_result(result)
        return done


def _live_activation(fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """An activation (the SDK submits nothing else) that replays no history."""
    if getattr(fn, "__name__", "") != "activate" or len(args) != 1:
        return False
    replaying = getattr(args[0], "is_replaying", None)
    return replaying is False


def activation_executor(mode: SandboxMode, max_workers: int) -> ThreadPoolExecutor | None:
    """For the worker's `workflow_task_executor`: inline live activations when workflows run
    unsandboxed (workers/sandbox.py); a sandbox keeps the SDK's own pool (None)."""
    return LiveActivationsInline(max_workers) if mode == "off" else None
