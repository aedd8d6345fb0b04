"""`agentlane` command line: send messages, watch, status, abort, reset, branch, list, transcript;
run the worker and the HTTP gateway; start and stop the embedded dev server; run the demo."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, BinaryIO

from agentlane.headers import AUTH_HEADER_STYLES
from agentlane.ids import InvalidSessionKey, check_session_key
from agentlane.reset_help import RESET_HELP

# Every command builds the parser: only light modules at the top. pydantic contracts and the SDKs
# are imported by the commands that use them (issue 22; tests/unit/test_cli_imports.py).
if TYPE_CHECKING:
    from agentlane.config import AgentlaneConfig, AuthProfile
    from agentlane.messages import Routing
    from agentlane.run import ExecutionResult
    from agentlane.settings import Settings
    from clients.api import AgentlaneClient

REPO = Path(__file__).resolve().parent.parent


def load_devserver() -> ModuleType:
    """temporal-dev/ is a folder of scripts, not a package; load its module by path."""
    path = REPO / "temporal-dev" / "devserver.py"
    spec = importlib.util.spec_from_file_location("agentlane_devserver", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def ui_link(settings: Settings, workflow_id: str) -> str:
    from urllib.parse import quote

    port = int(os.environ.get("AGENTLANE_UI_PORT", "8233"))
    return (
        f"http://localhost:{port}/namespaces/{settings.namespace}/workflows/"
        f"{quote(workflow_id, safe='')}"
    )


# Exit codes (README "CLI exit codes"): scripts can tell the outcome without parsing output.
EXIT_OK = 0
# How long `send` waits for the session to take a message again after its run was ended in
# Temporal (it queues it at once; this covers a busy worker).
RERUN_WAIT_SECONDS = 60.0
EXIT_ERROR = 1
EXIT_REJECTED = 2
EXIT_RUN_FAILED = 3
EXIT_RUN_ABORTED = 4
EXIT_NO_WORKER = 5
EXIT_NOT_FOUND = 6
EXIT_UNREACHABLE = 7
# The session's queue dropped the message (its text is in the transcript; summarize counts it in
# the next run's overflow summary): it was taken, and will not be answered as it was sent.
EXIT_DROPPED = 8
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


class MessageInputError(ValueError):
    """The message as given cannot be sent (both text and --file, more than the limit)."""


def _message_text(args: argparse.Namespace) -> str:
    """The text from the arguments, a file (`--file`), or standard input (`-` or no text): a
    message longer than the OS argument limit can still be sent. A file or standard input is
    read up to what the limit allows (`/dev/zero` or `yes |` end at once, refused), and a
    UTF-8 byte-order mark an editor put first is not part of the message."""
    if args.file:
        if args.text and args.text != ["-"]:
            raise MessageInputError("give the message as text or with --file, not both")
        with open(args.file, "rb") as f:
            return _bounded_text(f)
    if args.text in ([], ["-"]):
        if sys.stdin.isatty() and not args.text:
            raise SystemExit("agentlane send: give the text, `-` for standard input, or --file")
        return _bounded_text(sys.stdin.buffer)
    return " ".join(args.text)


def _bounded_text(source: BinaryIO) -> str:
    from agentlane.messages import MAX_MESSAGE_CHARS

    # Four bytes a character at most, and one more to know there is more.
    data = source.read(MAX_MESSAGE_CHARS * 4 + 1)
    if len(data) > MAX_MESSAGE_CHARS * 4:
        raise MessageInputError(
            f"the message is longer than {MAX_MESSAGE_CHARS} characters, the limit (send a "
            "file's name and let the agent read it)"
        )
    return data.decode("utf-8-sig", errors="strict")


async def _offset_before_send(client: AgentlaneClient, key: str) -> int:
    """Where the session's stream ends now (a query, which a worker answers): the run's events
    come after it. With no worker polling there is nothing to wait for (0: the send will say
    there is no worker)."""
    call = asyncio.ensure_future(client.events_offset(key))
    done, _ = await asyncio.wait({call}, timeout=0.5)
    if not done and await client.workers_polling():
        done, _ = await asyncio.wait({call}, timeout=2.5)
    if not done:
        call.cancel()
        await asyncio.wait({call})
        return 0
    try:
        return call.result()
    except Exception:
        return 0


def _offset(value: str) -> int:
    """A stream offset from the command line: a whole number, 0 or more."""
    try:
        offset = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if offset < 0:
        raise argparse.ArgumentTypeError(f"{offset} is before the stream's first event (0)")
    return offset


def _tell_waiting(why: str) -> None:
    """A call waits for a busy worker: say so rather than wait in silence."""
    print(why, file=sys.stderr, flush=True)


async def _send(args: argparse.Namespace) -> int:
    from agentlane.messages import FateState, SendDisposition
    from agentlane.pricing import cost_label
    from agentlane.run import ExecutionStatus
    from clients.api import AgentlaneClient, NoWorker, SendRejected
    from clients.render import TerminalRenderer

    try:
        text = _message_text(args)
    except UnicodeDecodeError as err:
        print(
            f"rejected: the message is not valid UTF-8 ({err.reason} at byte {err.start})",
            file=sys.stderr,
        )
        return EXIT_REJECTED
    except OSError as err:
        # The message's file, not the server: the catch-all below would call it unreachable.
        print(f"rejected: cannot read the message file: {err}", file=sys.stderr)
        return EXIT_REJECTED
    except MessageInputError as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    try:
        routing = _callback_routing(args)  # before connecting: a bad URL is the input's fault
    except ValueError as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    client = await AgentlaneClient.connect_cli()
    offset = await _offset_before_send(client, args.session) if args.watch else 0
    try:
        receipt = await client.send(
            args.session,
            text,
            routing=routing,
            mode=args.mode,
            workspace=args.workspace,
            model=args.model,
            message_id=args.message_id,
            queue=args.queue,
            session_overrides={"auth_profile": args.profile} if args.profile else None,
            thinking=args.thinking,
            reasoning=args.reasoning,
            on_wait=_tell_waiting,
        )
    except (SendRejected, ValueError) as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    except NoWorker as err:
        print(str(err), file=sys.stderr)
        return EXIT_NO_WORKER
    # Only a queued message waits behind others: a started one is still counted in the queue
    # until its run takes it (the debounce), which read as "queue=1" for an idle session.
    waiting = (
        f" queue={receipt.queue_length}" if receipt.disposition == SendDisposition.QUEUED else ""
    )
    print(
        f"{receipt.disposition.value}: message #{receipt.message_seq} "
        f"({receipt.mode.value}){waiting}" + (f" — {receipt.note}" if receipt.note else ""),
        file=sys.stderr,
    )
    if receipt.disposition == SendDisposition.DROPPED:
        return EXIT_DROPPED
    if not args.watch or receipt.disposition in (
        SendDisposition.DUPLICATE,
        SendDisposition.STEERED,
    ):
        return EXIT_OK
    fate = await client.wait_started(args.session, receipt.message_seq)
    if fate.state != FateState.STARTED or fate.run_id is None:
        said = fate.note.removeprefix(f"{fate.state.value}: ")
        print(f"message #{fate.seq} {fate.state.value}: {said}", file=sys.stderr)
        if fate.state == FateState.DROPPED:
            return EXIT_DROPPED
        return EXIT_RUN_FAILED if fate.state == FateState.FAILED else EXIT_OK
    print(f"run {fate.run_id} started", file=sys.stderr)
    renderer = TerminalRenderer()
    run_id = fate.run_id
    while True:
        async for item in client.watch(args.session, offset, until_run=run_id):
            renderer.render(item.event)
            offset = item.offset + 1
        result = await client.wait_for_run(run_id)
        again = await _rerun_of(client, args.session, receipt.message_seq, result)
        if again is None:
            break
        assert result.error is not None
        ended = result.error.message.split(";")[0]
        print(f"{ended}; the message runs again in {again}", file=sys.stderr)
        run_id = again
    print(
        f"\nrun {result.run_id}: {result.status.value} ({_ended_how(result)}), "
        f"{result.turns} turns, "
        f"{result.tool_calls} tool calls, {result.usage.accumulated.total} tokens, "
        f"cost {cost_label(result.usage.accumulated.cost)}",
        file=sys.stderr,
    )
    if result.status == ExecutionStatus.ABORTED:
        return EXIT_RUN_ABORTED
    if result.status == ExecutionStatus.ERROR:
        if result.error is not None:
            print(f"error: {result.error.message}", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_OK


def _ended_how(result: ExecutionResult) -> str:
    """The termination reason, or for a run that ended in error what the error was (`error
    (error)` said nothing): `auth`, `server_error`, `connection_refused`..."""
    from workflows.policy.search_attributes import error_label

    if result.termination_reason.value == "error" and result.error is not None:
        return error_label(result.error) or "error"
    return result.termination_reason.value


async def _rerun_of(
    client: AgentlaneClient, session_key: str, seq: int, result: ExecutionResult
) -> str | None:
    """The run that takes message `seq` again after `result`'s run was ended in Temporal (the
    session queues its messages again), or None when there is nothing to follow."""
    from agentlane.messages import FateState
    from agentlane.run_outcome import ENDED_IN_TEMPORAL

    if result.error is None or result.error.detail != ENDED_IN_TEMPORAL:
        return None
    deadline = time.monotonic() + RERUN_WAIT_SECONDS
    while time.monotonic() < deadline:
        fate = await client.wait_started(session_key, seq)
        if fate.state != FateState.STARTED or fate.run_id is None:
            return None
        if fate.run_id != result.run_id:
            return fate.run_id
        await asyncio.sleep(0.2)  # the session has not seen the end yet
    return None


async def _watch(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient
    from clients.render import TerminalRenderer

    client = await AgentlaneClient.connect_cli()
    if not await client.session_ever_existed(args.session):
        print(f"error: session {args.session} does not exist", file=sys.stderr)
        return EXIT_NOT_FOUND
    if not await client.session_exists(args.session):
        print(
            f"session {args.session} is closed: what its stream still holds follows, then "
            "this ends (a message opens it again; watch it then)",
            file=sys.stderr,
            flush=True,
        )
    if args.from_offset:
        end = await client.events_offset(args.session)
        if args.from_offset > end:
            # Offsets past the end were never given out (the gateway answers 400 alike): it
            # would wait in silence for ever.
            print(
                f"error: offset {args.from_offset} is past the end of the session's event "
                f"stream ({end}); follow the live end with --from {end} (or no --from)",
                file=sys.stderr,
            )
            return EXIT_REJECTED
    renderer = TerminalRenderer()
    seen = asyncio.Event()

    async def tell_if_no_worker() -> None:
        # The stream is served by workers: say so rather than wait in silence.
        await asyncio.sleep(5)
        if not seen.is_set() and not await client.workers_polling():
            print(
                "no worker is running, so no events can be read yet; start one with "
                "`agentlane worker` (still waiting)",
                file=sys.stderr,
                flush=True,
            )

    notice = asyncio.create_task(tell_if_no_worker())
    async for item in client.watch(args.session, args.from_offset):
        seen.set()
        if args.json:
            print(
                json.dumps({"offset": item.offset, **item.event.model_dump(mode="json")}),
                flush=True,
            )
        else:
            renderer.render(item.event)
    notice.cancel()
    return 0


async def _status(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect_cli()
    status = await client.status(args.session, on_wait=_tell_waiting)
    print(status.model_dump_json(indent=2, exclude_none=True))
    return 0


async def _tools(args: argparse.Namespace) -> int:
    """The tools the session's next run is offered, and which policy layer removed the rest."""
    from agentlane.config import ConfigError
    from agentlane.messages import Routing
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect_cli()
    routing = Routing(channel=args.channel, to=args.to, thread=args.thread)
    try:
        report = await client.session_tools(args.session, routing=routing, sender=args.sender)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_REJECTED
    if args.json:
        print(report.model_dump_json(indent=2))
        return EXIT_OK
    new = "" if report.session_exists else " (no such session yet: as a new one would be)"
    print(f"session {report.session_key}{new}: agent {report.agent_id}, model {report.model}")
    print(f"offered: {', '.join(report.offered) or '(no tools)'}")
    if report.removed:
        width = max(len(name) for name in report.removed)
        print("removed:")
        for name, layer in report.removed.items():
            print(f"  {name:<{width}}  by {layer}")
    for entry in report.unknown_entries:
        print(f"warning: the allowlist entry {entry!r} names no known tool", file=sys.stderr)
    return EXIT_OK


async def _abort(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect_cli()
    receipt = await client.abort(args.session, args.reason, on_wait=_tell_waiting)
    print(receipt.note)
    if receipt.run_id is None:
        return EXIT_OK
    if args.wait:
        result = await client.wait_for_run(receipt.run_id)
        print(f"run {result.run_id}: {result.status.value} ({result.termination_reason.value})")
    return EXIT_OK


async def _reset(args: argparse.Namespace) -> int:
    import getpass

    from clients.api import AgentlaneClient, SendRejected

    client = await AgentlaneClient.connect_cli()
    try:
        receipt = await client.reset(args.session, args.reason, by=f"cli:{getpass.getuser()}")
    except SendRejected as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    print(f"session {receipt.session_key} reset at {receipt.entry_id}: {receipt.note}")
    return EXIT_OK


async def _branch(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient, SendRejected

    client = await AgentlaneClient.connect_cli()
    try:
        receipt = await client.branch(args.session, args.from_entry, args.to)
    except SendRejected as err:  # BranchRejected, or a configuration the new session cannot use
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    print(
        f"branched {receipt.parent_session} at {receipt.branch_point} into "
        f"{receipt.session_key} ({receipt.copied} entries copied); send to it with "
        f"`agentlane send {receipt.session_key} ...`"
    )
    return EXIT_OK


async def _queue(args: argparse.Namespace) -> int:
    from agentlane.queue_settings import QueueSettings
    from clients.api import AgentlaneClient, SendRejected

    client = await AgentlaneClient.connect_cli()
    words = " ".join(args.directive)
    settings: QueueSettings | None
    try:
        if words:
            settings = await client.configure_queue(args.session, words, on_wait=_tell_waiting)
        else:
            status = await client.status(args.session, on_wait=_tell_waiting)
            settings = status.queue_settings
    except SendRejected as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    if settings is not None:
        print(
            f"mode:{settings.mode.value} debounce:{settings.debounce_ms}ms cap:{settings.cap} "
            f"drop:{settings.drop.value} dedupe:{settings.dedupe.value}"
        )
    return EXIT_OK


async def _close(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect_cli()
    await client.close(args.session)
    print(f"session {args.session} closes once its queue is empty")
    return 0


async def _sessions(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect_cli()
    if args.view == "tree":
        from clients.session_text import tree_lines

        for line in tree_lines(await client.session_tree()):
            print(line)
        return EXIT_OK
    from clients.session_listing import list_sessions

    return await list_sessions(client, args)


async def _setup_namespace(args: argparse.Namespace) -> int:
    from agentlane.settings import Settings
    from agentlane.temporal_client import connect
    from clients.namespace_setup import AttributeTypeConflict, commands_text, register

    settings = Settings.from_env()
    settings = settings.model_copy(
        update={
            "namespace": args.namespace or settings.namespace,
            "temporal_address": args.address or settings.temporal_address,
        }
    )
    lines = commands_text(settings.namespace, settings.temporal_address)
    if args.print:
        print("\n".join(lines))
        return EXIT_OK
    try:
        report = await register(await connect(settings), settings.namespace)
    except AttributeTypeConflict as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    print(
        f"namespace {settings.namespace} at {settings.temporal_address}: "
        f"added {', '.join(report.added) or 'none'}; already there: "
        f"{', '.join(report.present) or 'none'}"
    )
    print("the same with the temporal CLI:")
    print("\n".join(lines))
    return EXIT_OK


async def _transcript(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect_cli()
    entries = client.transcript(args.session)
    if not entries and not await client.session_exists(args.session):
        print(f"error: session {args.session} does not exist (no transcript)", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.json:
        from activities.branch_history import current_branch

        shown = entries if args.all else current_branch(entries)[1]
        for entry in shown:
            print(entry.model_dump_json(exclude_defaults=True))
        return 0
    from clients.session_text import transcript_lines

    for line in transcript_lines(entries, show_all=args.all):
        print(line)
    return 0


async def _schedule(args: argparse.Namespace) -> int:
    """`agentlane schedule create|list|describe|pause|unpause|trigger|delete`."""
    from clients.api import AgentlaneClient
    from clients.schedule_spec import (
        ScheduleSpecError,
        parse_catchup_window,
        parse_overlap,
        parse_timing,
    )
    from clients.schedule_text import schedule_lines, summary_lines
    from clients.schedules import ScheduleNotFound, ScheduleRejected

    action, sid = args.schedule_command, str(getattr(args, "schedule_id", ""))
    if action == "create":
        # A bad timing is refused before any round trip (the server need not be up to say so).
        try:
            parse_timing(args.cron, args.every)
            parse_overlap(args.overlap)
            parse_catchup_window(args.catchup_window)
        except ScheduleSpecError as err:
            print(f"error: {err}", file=sys.stderr)
            return EXIT_REJECTED
    client = await AgentlaneClient.connect_cli()
    try:
        if action == "create":
            view = await client.create_schedule(
                sid,
                args.session,
                args.message,
                cron=args.cron,
                every=args.every,
                overlap=args.overlap,
                catchup_window=args.catchup_window,
                paused=args.paused,
                note=args.note,
                workspace=args.workspace,
                model=args.model,
            )
            print(f"schedule {view.id} created")
            for line in schedule_lines(view):
                print(line)
        elif action == "list":
            for line in summary_lines(await client.list_schedules()):
                print(line)
        elif action == "describe":
            view = await client.describe_schedule(sid)
            if args.json:
                print(view.model_dump_json(indent=2))
            else:
                for line in schedule_lines(view):
                    print(line)
        elif action == "pause":
            await client.pause_schedule(sid, args.note)
            print(f"schedule {sid} paused; `agentlane schedule unpause {sid}` resumes it")
        elif action == "unpause":
            await client.unpause_schedule(sid, args.note)
            print(f"schedule {sid} resumed")
        elif action == "trigger":
            await client.trigger_schedule(sid)
            print(f"schedule {sid} fires now (skipped if its last firing's run is still going)")
        else:
            await client.delete_schedule(sid)
            print(f"schedule {sid} deleted (a run already started finishes)")
    except ScheduleRejected as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    except ScheduleNotFound as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_NOT_FOUND
    return EXIT_OK


def _read_secret(prompt: str) -> str:
    """One line of stdin when it is not a terminal (a pipe), else a prompt that does not echo."""
    import getpass

    if not sys.stdin.isatty():
        return sys.stdin.readline().strip()
    return getpass.getpass(prompt).strip()


def _declared_profiles(settings: Settings) -> dict[str, AuthProfile]:
    """The config's profiles (those with a key in `AGENTLANE_KEY_<P>` are listed too); none
    when the config cannot be read (`config check` says why)."""
    from agentlane.config import ConfigError, load_config

    try:
        return load_config(settings.data_dir).auth_profiles
    except ConfigError:
        return {}


def _unused_stored(settings: Settings, profile_id: str, provider: str) -> str | None:
    """Why a stored profile is never chosen, or None: the config's profile list or order for its
    provider (SPEC §7.3) does not name it."""
    from agentlane.config import ConfigError, load_config

    try:
        config = load_config(settings.data_dir)
    except ConfigError:
        return None
    order = config.auth_order.get(provider)
    if order:
        return None if profile_id in order else f"[auth.order] {provider} = {order}"
    declared = [pid for pid, p in config.auth_profiles.items() if p.provider == provider]
    if declared and profile_id not in declared:
        return f"the config declares {', '.join(sorted(declared))} for {provider}"
    return None


def _auth(args: argparse.Namespace) -> int:
    """Keys go into the store (sealed when encryption is on); they are read from a prompt or
    stdin, never argv. So can
    header values (`--header NAME` alone), since argv is visible to every user in `ps`."""
    from activities.auth_store import AuthStore, AuthStoreError
    from agentlane.settings import Settings

    settings = Settings.from_env()
    store = AuthStore.for_data_dir(settings.data_dir, declared=_declared_profiles(settings))
    if args.action == "set":
        if not args.profile or not args.provider:
            print("usage: agentlane auth set PROFILE --provider PROVIDER", file=sys.stderr)
            return 2
        key = _read_secret(f"key for {args.profile}: ")
        if not key:
            print("no key given; nothing stored", file=sys.stderr)
            return 2
        headers: dict[str, str] = {}
        for item in args.header or []:
            name, given, value = item.partition("=")
            name = name.strip()
            if not given:
                # After the key, one line each, in the order the options were given.
                value = _read_secret(f"value of header {name} for {args.profile}: ")
            headers[name] = value.strip()
        try:
            path = store.set_key(
                args.profile,
                args.provider,
                key,
                base_url=args.base_url,
                auth_header=args.auth_header,
                headers=headers,
            )
        except AuthStoreError as err:
            print(f"error: {err}; nothing stored", file=sys.stderr)
            return 2
        print(f"stored key for profile {args.profile} ({args.provider}) in {path}")
        unused = _unused_stored(settings, args.profile, args.provider)
        if unused is not None:
            print(
                f"warning: runs will not use {args.profile}: {unused}, and a provider's profiles "
                f'come from there when it does; add [auth.profiles."{args.profile}"] provider = '
                f'"{args.provider}" (or the id to the order) in the config',
                file=sys.stderr,
            )
        # A new key starts afresh: what the old one earned (a billing disable of hours, a
        # cooldown) is not this key's.
        if _clear_health(settings, args.profile):
            print(f"cleared the cooldown of {args.profile}")
        return 0
    if args.action == "clear":
        if not args.profile:
            print("usage: agentlane auth clear PROFILE", file=sys.stderr)
            return 2
        cleared = _clear_health(settings, args.profile)
        print(
            f"cleared the cooldown of {args.profile}: runs use it again"
            if cleared
            else f"{args.profile} was not cooling down"
        )
        return 0
    if args.action == "remove":
        removed = store.remove(args.profile or "")
        print("removed" if removed else f"no profile {args.profile}")
        return 0 if removed else 1
    try:
        profiles = store.profiles()
    except AuthStoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    health = _profile_health(store.settings)
    for profile in profiles.values():
        state = "key set" if profile.key else "no key"
        # Header names and the auth style only: values are secrets like the key.
        auth = f"auth {profile.auth_header or 'default'}"
        names = f"headers {','.join(sorted(profile.headers)) or '-'}"
        # A key in an environment variable is this shell's: a worker has its own environment.
        source = profile.source
        if source.isupper():
            source = f"{source} (this shell's; a worker reads its own environment)"
        ready = health.get(profile.id, "ready")
        unused = _unused_stored(store.settings, profile.id, profile.provider)
        if unused is not None:
            ready = f"not used ({unused})"
        print(
            f"{profile.id}\t{profile.provider}\t{profile.type}\t{state}\t{auth}\t{names}\t"
            f"{source}\t{ready}"
        )
    return 0


def _clear_health(settings: Settings, profile_id: str) -> bool:
    from activities.profile_listing import clear_health
    from store.sync import run_sync

    return run_sync(settings, lambda store: clear_health(store, profile_id))


def _profile_health(settings: Settings) -> dict[str, str]:
    """Each profile's shared cooldown state, in words ("cooling 25 s (rate_limit)", "disabled
    4 h 59 min (billing)"); a profile not listed is ready."""
    import time

    from agentlane.profile_state import ProfileUsage
    from store.sync import run_sync

    rows = run_sync(settings, lambda store: store.usage_rows())
    now = time.time()
    out: dict[str, str] = {}
    for row in rows:
        pid = row.profile_id
        try:
            usage = ProfileUsage.model_validate_json(row.usage)
        except ValueError:
            continue
        until = usage.unusable_until()
        if until is None or until <= now:
            continue
        left = int(until - now)
        span = (
            f"{left // 3600} h {left % 3600 // 60} min"
            if left >= 3600
            else (f"{left // 60} min" if left >= 60 else f"{left} s")
        )
        disabled = usage.disabled_until is not None and usage.disabled_until > now
        reason = usage.disabled_reason if disabled else usage.cooldown_reason
        scope = f" for {usage.cooldown_model}" if usage.cooldown_model and not disabled else ""
        word = "disabled" if disabled else "cooling"
        out[pid] = f"{word} {span}{scope} ({reason.value if reason else 'unknown'})"
    return out


def _models(_: argparse.Namespace) -> int:
    from agentlane.config import load_config
    from agentlane.pricing import prices_text
    from agentlane.settings import Settings

    config = load_config(Settings.from_env().data_dir)
    for ref, entry in sorted(config.models.items()):
        marker = "*" if ref == config.default_model else " "
        print(
            f"{marker} {ref}\t{entry.api.value}\tcontext {entry.context_window}\t"
            f"thinking {','.join(entry.capabilities.thinking_levels)}\t"
            f"{prices_text(entry.prices)}"
        )
    return 0


def _config(args: argparse.Namespace) -> int:
    """Validate the configuration without starting anything."""
    from agentlane.config import ConfigError, load_config
    from agentlane.settings import Settings

    try:
        config = load_config(Settings.from_env().data_dir)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_REJECTED
    print(
        f"configuration ok: {len(config.models)} models, default model {config.default_model}, "
        f"{len(config.agents)} agents, {len(config.auth_profiles)} auth profiles"
    )
    for line in _chain_lines(config):
        print(line)
    _warn_tool_names(config)
    _warn_small_windows(config)
    return EXIT_OK


def _warn_small_windows(config: AgentlaneConfig) -> None:
    """The context window guard (SPEC §9) refuses a run on a model whose window is under 16 000
    tokens before any call, and warns under 32 000: said here, not at a user's first message."""
    from agentlane.config import CONTEXT_WINDOW_BLOCK_BELOW, CONTEXT_WINDOW_WARN_BELOW

    agents = sorted(config.agents) or ["main"]
    for ref in sorted(config.models):
        for agent_id in agents:
            window = config.context_window(ref, agent_id)
            whose = f" (agent {agent_id}'s context_tokens)" if len(agents) > 1 else ""
            if window < CONTEXT_WINDOW_BLOCK_BELOW:
                print(
                    f"warning: {ref} has a context window of {window} tokens{whose}, under the "
                    f"minimum of {CONTEXT_WINDOW_BLOCK_BELOW}: a run on it ends before any call",
                    file=sys.stderr,
                )
            elif window < CONTEXT_WINDOW_WARN_BELOW:
                print(
                    f"warning: {ref} has a context window of {window} tokens{whose}, under "
                    f"{CONTEXT_WINDOW_WARN_BELOW}: its runs warn, and long sessions compact often",
                    file=sys.stderr,
                )
            else:
                continue
            break  # once a model


def _warn_tool_names(config: AgentlaneConfig) -> None:
    """SPEC §13.3: an allowlist entry naming no tool is only a warning (a plugin may bring it)."""
    from agentlane.tool_calls import BASE_TOOLS
    from workflows.policy.tool_policy import config_allow_entries, unknown_names

    agents = [agent.tool_rules() for agent in config.agents.values()]
    for name in unknown_names(config_allow_entries(config.tools, agents), BASE_TOOLS):
        print(f"warning: the tool allowlist entry {name!r} names no known tool", file=sys.stderr)


def _chain_lines(config: AgentlaneConfig) -> list[str]:
    """Each configured agent's model chains: for a session on each model, where a failed call
    goes next (SPEC §8.1). An agent written in the config appends its model to every chain of
    its sessions, whatever model a session asked for."""
    from activities.profile_listing import failover_config
    from workflows.policy.model_fallback import effective_chain

    if not config.agents:
        return ["model chains: no agent is configured, so no session falls back to another model"]
    lines = ["model chains (a session's model, then where a failed call goes next):"]
    for agent_id in sorted(config.agents):
        own = config.agent(agent_id).model or config.default_model
        chains = []
        for ref in [own, *sorted(r for r in config.models if r != own)]:
            failover = failover_config(config, agent_id, ref)
            chain = effective_chain(ref, failover.primary, failover.fallbacks, failover.models)
            if len(chain) > 1:  # a model with nowhere to go is not a chain
                chains.append("    " + " → ".join(r.key for r in chain))
        if chains:
            lines += [f"  agent {agent_id}:", *chains]
        else:
            lines.append(f"  agent {agent_id}: no fallbacks: each session stays on its own model")
    return lines


async def _gc(args: argparse.Namespace) -> int:
    """Remove offloaded payloads nothing can read any more (agentlane/payload_gc.py)."""
    from datetime import timedelta

    from agentlane.data_converter import LocalFileStorageDriver
    from agentlane.payload_gc import collect
    from agentlane.settings import Settings
    from clients.api import AgentlaneClient
    from store.open import open_store

    settings = Settings.from_env()
    client = await AgentlaneClient.connect_cli(settings)
    retention = (
        settings.payload_retention
        if args.retention_hours is None
        else timedelta(hours=args.retention_hours)
    )
    store = await open_store(settings)
    try:
        report = await collect(
            client.client,
            store,
            LocalFileStorageDriver(settings.payloads_dir),
            grace=settings.payload_grace,
            retention=retention,
            dry_run=args.dry_run,
        )
    finally:
        await store.close()
    print(("would have " if args.dry_run else "") + report.line())
    return EXIT_OK


def _codec_server(args: argparse.Namespace) -> int:
    from clients.codec_server import serve

    if args.origin:
        origins = [args.origin]
    else:
        # Where `agentlane server start` put the UI, opened by either name.
        port = int(os.environ.get("AGENTLANE_UI_PORT", "8233"))
        origins = [f"http://localhost:{port}", f"http://127.0.0.1:{port}"]
    serve(args.host, args.port, origins)
    return EXIT_OK


def _encryption(args: argparse.Namespace) -> int:
    """Write a new key file (0600), or put a new current key in front of an existing one."""
    from agentlane.encryption import EncryptionConfigError, new_key_line, read_keys_file
    from agentlane.private_files import write_private

    path = Path(args.file)
    old = ""
    if path.exists():
        try:
            # Only a keys file takes a new key (the mode is fixed by the rewrite, 0600).
            pairs = read_keys_file(path, check_mode=False)
        except EncryptionConfigError as err:
            print(f"error: {err}; it was left untouched", file=sys.stderr)
            return EXIT_REJECTED
        if args.key_id and args.key_id in {kid for kid, _ in pairs}:
            print(f"error: {path} already has a key {args.key_id!r}", file=sys.stderr)
            return EXIT_REJECTED
        old = path.read_text()
    kid = args.key_id or f"k{len([ln for ln in old.splitlines() if ln.strip()]) + 1}"
    write_private(path, (new_key_line(kid) + "\n" + old).encode())
    print(f"key {kid} is now the current key in {path}; keep the file secret and backed up")
    return EXIT_OK


def _callback_routing(args: argparse.Namespace) -> Routing | None:
    """`send --callback-url URL [--callback-secret-ref REF]`: replies are POSTed there."""
    url = getattr(args, "callback_url", None)
    if url is None:
        if getattr(args, "callback_secret_ref", None):
            raise ValueError("--callback-secret-ref needs --callback-url")
        return None
    from agentlane.messages import Routing
    from clients.api_errors import rejection_text

    try:
        return Routing(callback_url=url, callback_secret_ref=args.callback_secret_ref)
    except ValueError as err:
        raise ValueError(rejection_text(err)) from None


def _webhook(args: argparse.Namespace) -> int:
    """Print a webhook signing secret (created in the store if need be): the
    session's own, or a named one (`--ref`, e.g. one per adapter or token)."""
    from agentlane.settings import Settings
    from agentlane.webhook_secrets import WebhookSecretStore
    from agentlane.webhooks import default_secret_ref

    store = WebhookSecretStore(Settings.from_env())
    ref = args.target if args.ref else default_secret_ref(check_session_key(args.target))
    secret = store.rotate(ref) if args.rotate else store.ensure(ref)
    print(f"ref: {ref}", file=sys.stderr)
    print(secret.decode())
    return EXIT_OK


async def _db(args: argparse.Namespace) -> int:
    """`db migrate | status | import`: the store that holds everything outside Temporal."""
    from agentlane.settings import Settings
    from store.file_import import import_files, warn_unimported
    from store.open import describe, open_store

    settings = Settings.from_env()
    store = await open_store(settings)
    try:
        if args.action == "migrate":
            version = await store.migrate()
            print(f"{store.backend} store at {describe(settings)}: schema version {version}")
            return EXIT_OK
        if args.action == "import":
            source = Path(args.source) if args.source else settings.data_dir
            source = await asyncio.to_thread(source.resolve)
            if not await asyncio.to_thread(source.is_dir):
                print(f"error: {source} is not a folder", file=sys.stderr)
                return EXIT_REJECTED
            report = await import_files(source, store)
            lines = report.lines()
            if not lines:
                print(f"nothing to import from {source} (no files of an older version there)")
                return EXIT_OK
            print(f"imported {source} into the {store.backend} store at {describe(settings)}")
            for line in lines:
                print(f"  {line}")
            return EXIT_OK
        status = await store.status()
        print(f"backend: {status.backend}")
        print(f"location: {describe(settings)}")
        print(f"schema version: {status.schema_version} (latest {status.latest_version})")
        for table, count in status.counts.items():
            print(f"{table}: {count}")
        warning = await warn_unimported(settings, store, log_it=False)
        if warning:
            print(f"warning: {warning}")
        return EXIT_OK
    finally:
        await store.close()


def _server(args: argparse.Namespace) -> int:
    devserver = load_devserver()
    return int(devserver.main([args.action]))


def _worker(args: argparse.Namespace) -> int:
    from workers.main import main as worker_main

    # The worker reads its settings from the environment, as every process does.
    if args.host_id:
        os.environ["AGENTLANE_HOST_ID"] = args.host_id
    if args.workspaces:
        os.environ["AGENTLANE_WORKSPACES"] = args.workspaces

    worker_main([])
    return 0


def _gateway(args: argparse.Namespace) -> int:
    """`gateway`: serve the HTTP gateway; `gateway token ...`: manage its bearer tokens."""
    from agentlane.settings import Settings

    settings = Settings.from_env()
    if args.gateway_command is None:
        from clients.gateway.app import serve

        print(
            f"agentlane gateway on http://{args.host or settings.gateway_host}:"
            f"{args.port or settings.gateway_port} (API reference: /openapi.json)",
            flush=True,
        )
        serve(settings, args.host, args.port)
        return EXIT_OK
    return _gateway_token(args, settings)


def _gateway_token(args: argparse.Namespace, settings: Settings) -> int:
    import datetime

    from clients.gateway.auth import TokenError, TokenStore

    store = TokenStore(settings)
    if args.action == "create":
        try:
            record, token = store.create(args.name or "", args.prefix or [], args.read_only)
        except TokenError as err:
            print(f"error: {err}; nothing stored", file=sys.stderr)
            return EXIT_REJECTED
        scope = ", ".join(record.prefixes) if record.prefixes else "every session"
        print(
            f"token {record.id} ({record.name or 'unnamed'}): {scope}"
            f"{', read-only' if record.read_only else ''}; stored hashed in {store.where()}."
        )
        print("It is shown only now; keep it secret. The token:")
        print(token)
        return EXIT_OK
    if args.action == "revoke":
        if not args.token_id:
            print("usage: agentlane gateway token revoke ID", file=sys.stderr)
            return EXIT_REJECTED
        if store.revoke(args.token_id):
            print(f"token {args.token_id} revoked")
            return EXIT_OK
        print(f"error: no token {args.token_id}", file=sys.stderr)
        return EXIT_NOT_FOUND

    def when(ts: float | None) -> str:
        if ts is None:
            return "never"
        return datetime.datetime.fromtimestamp(ts).isoformat(sep=" ", timespec="seconds")

    print("id\tname\tprefixes\tread-only\tcreated\tlast used")
    for info in store.list():
        print(
            f"{info.id}\t{info.name or '-'}\t{','.join(info.prefixes) or '*'}\t"
            f"{'yes' if info.read_only else 'no'}\t{when(info.created)}\t{when(info.last_used)}"
        )
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from clients.demo import run_demo

    return run_demo(args.session, serve=args.serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentlane", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("send", help="send a message to a session (created if new)")
    p.add_argument("session")
    p.add_argument("text", nargs="*", help="the message; `-` or nothing reads standard input")
    p.add_argument("--file", help="read the message from this file (UTF-8)")
    p.add_argument("--mode", help="steer, followup, collect, queue, steer-backlog, interrupt")
    p.add_argument("--workspace", help="workspace folder (used when the session is created)")
    p.add_argument(
        "--model",
        help="provider/model, e.g. offline/planner: the session's model from this message on",
    )
    p.add_argument(
        "--profile",
        help="pin the new session to this auth profile id: its runs never rotate away from it",
    )
    p.add_argument(
        "--thinking",
        metavar="LEVEL",
        help="the session's thinking level from this message on: off, minimal, low, medium, "
        "high, xhigh, adaptive (default: the agent's `thinking` in the config)",
    )
    p.add_argument(
        "--reasoning",
        metavar="MODE",
        help="what the session shows of the model's reasoning from this message on: off "
        "(hidden), on (one block, before the answer's blocks), stream (as it comes) (default: "
        "the agent's `reasoning` in the config)",
    )
    p.add_argument("--message-id", help="provider message id, for dedupe")
    p.add_argument("--queue", help='queue options for this message alone, e.g. "debounce:0 cap:5"')
    p.add_argument(
        "--no-watch",
        dest="watch",
        action="store_false",
        help="return once the session accepted the message",
    )
    p.add_argument("--callback-url", help="POST this session's replies to this URL (webhooks)")
    p.add_argument(
        "--callback-secret-ref", help="sign them with this stored secret (default: the session's)"
    )
    p.set_defaults(func=_send)

    p = sub.add_parser("watch", help="follow a session's events live")
    p.add_argument("session")
    p.add_argument(
        "--from", dest="from_offset", type=_offset, default=0, help="stream offset (0 or more)"
    )
    p.add_argument("--json", action="store_true", help="one JSON event per line")
    p.set_defaults(func=_watch)

    p = sub.add_parser("status", help="idle / running / streaming / compacting, run, usage")
    p.add_argument("session")
    p.set_defaults(func=_status)

    p = sub.add_parser(
        "tools", help="the tools a session's next run is offered, and what the policy removed"
    )
    p.add_argument("session")
    p.add_argument("--sender", help="as for a message from this sender (owner-only tools)")
    p.add_argument("--channel", help="as for a message through this channel")
    p.add_argument("--to", help="... to this group or recipient (routing.to)")
    p.add_argument("--thread", help="... in this thread or topic")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_tools)

    p = sub.add_parser("abort", help="abort the session's current run")
    p.add_argument("session")
    p.add_argument("--reason", default="user abort")
    p.add_argument(
        "--no-wait", dest="wait", action="store_false", help="do not wait for the run to end"
    )
    p.set_defaults(func=_abort)

    from clients.approvals_cli import add_parsers as add_approval_parsers

    add_approval_parsers(sub)

    p = sub.add_parser("reset", help=RESET_HELP, description=RESET_HELP[0].upper() + RESET_HELP[1:])
    p.add_argument("session")
    p.add_argument("--reason", default="user reset", help="recorded in the reset marker")
    p.set_defaults(func=_reset)

    p = sub.add_parser(
        "branch",
        help="a new session whose history is this one's up to an entry; both go on on their own",
        description="Start a new session whose history is SESSION's branch up to and including "
        "entry --from (ids: `agentlane transcript SESSION --all`). It keeps SESSION's settings "
        "(model, workspace, thinking); the two sessions then go on independently.",
    )
    p.add_argument("session")
    p.add_argument("--from", dest="from_entry", required=True, help="the entry id to branch at")
    p.add_argument("--to", help="the new session's key (default: <session>-b<n>, printed)")
    p.set_defaults(func=_branch)

    p = sub.add_parser(
        "queue",
        help="show or change how a busy session queues messages (the /queue directive)",
        description="Words: a mode (steer, followup, collect, steer-backlog, interrupt), "
        "mode:<m>, debounce:<duration> (500, 2s), cap:<n>, drop:old|new|summarize, "
        "dedupe:message-id|prompt|none; or reset. No words: show the settings in force.",
    )
    p.add_argument("session")
    p.add_argument("directive", nargs="*")
    p.set_defaults(func=_queue)

    p = sub.add_parser("close", help="end a session (its transcript stays)")
    p.add_argument("session")
    p.set_defaults(func=_close)

    p = sub.add_parser(
        "sessions",
        help="list running sessions (filtered by search attributes: --phase waiting, "
        "--model ..., --error rate_limit); `sessions tree`: every session, branches under "
        "their parent, resets within each",
    )
    p.add_argument("view", nargs="?", choices=["list", "tree"], default="list")
    from clients.session_listing import add_filter_arguments

    add_filter_arguments(p)
    p.set_defaults(func=_sessions)

    p = sub.add_parser(
        "setup-namespace",
        help="register agentlane's search attributes on a Temporal cluster's namespace "
        "(the dev server does it at start)",
    )
    p.add_argument("--namespace", help="default AGENTLANE_NAMESPACE (default)")
    p.add_argument("--address", help="default AGENTLANE_TEMPORAL_ADDRESS (localhost:7233)")
    p.add_argument(
        "--print",
        action="store_true",
        help="only print the equivalent `temporal operator search-attribute create` commands",
    )
    p.set_defaults(func=_setup_namespace)

    p = sub.add_parser(
        "transcript",
        help="print a session's transcript (the current branch; --all: the whole file)",
    )
    p.add_argument("session")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--all",
        action="store_true",
        help="the whole file, branches before a reset included (markers as one line each)",
    )
    p.set_defaults(func=_transcript)

    _schedule_parser(sub)

    p = sub.add_parser("auth", help="provider keys in the auth store (never in history)")
    p.add_argument(
        "action",
        choices=["set", "list", "remove", "clear"],
        help="clear: forget a profile's cooldown or billing disable (after paying, say)",
    )
    p.add_argument("profile", nargs="?", help="profile id, e.g. anthropic:work")
    p.add_argument("--provider", help="anthropic, openai, or a compatible server's name")
    p.add_argument("--base-url", help="for an OpenAI-compatible server")
    p.add_argument(
        "--auth-header",
        choices=list(AUTH_HEADER_STYLES),
        help="how the key is sent (default: as the provider's SDK sends it); none sends no key",
    )
    p.add_argument(
        "--header",
        action="append",
        metavar="NAME[=VALUE]",
        help="a header sent with every call of this profile (repeatable). NAME alone reads the "
        "value from stdin after the key: a value given on the command line is visible in ps",
    )
    p.set_defaults(func=_auth, sync=True)

    p = sub.add_parser("models", help="the model registry (built-in catalogue + config)")
    p.set_defaults(func=_models, sync=True)

    p = sub.add_parser("config", help="validate the configuration file (starts nothing)")
    p.add_argument("action", choices=["check"])
    p.set_defaults(func=_config, sync=True)

    p = sub.add_parser(
        "gc", help="remove offloaded payloads of closed workflows and old unowned ones"
    )
    p.add_argument("--dry-run", action="store_true", help="count, remove nothing")
    p.add_argument(
        "--retention-hours",
        type=float,
        default=None,
        help="unowned payloads older than this go (default AGENTLANE_PAYLOAD_RETENTION_H, 168)",
    )
    p.set_defaults(func=_gc)
    p = sub.add_parser("codec-server", help="decode encrypted payloads for the UI and CLI")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8081)
    p.add_argument(
        "--origin",
        default=None,
        help="the Temporal UI's origin (default http://localhost:<AGENTLANE_UI_PORT or 8233>, "
        "and the same port on 127.0.0.1)",
    )
    p.set_defaults(func=_codec_server, sync=True)

    p = sub.add_parser("encryption", help="payload encryption keys")
    p.add_argument("action", choices=["new-key"])
    p.add_argument("file", help="the keys file (AGENTLANE_ENCRYPTION_KEYS_FILE)")
    p.add_argument("--key-id", help="id of the new key (default k<n>)")
    p.set_defaults(func=_encryption, sync=True)

    p = sub.add_parser("webhook", help="webhook signing secrets (print, create, rotate)")
    p.add_argument("action", choices=["secret"])
    p.add_argument("target", help="a session key, or with --ref a secret reference")
    p.add_argument("--ref", action="store_true", help="TARGET is a secret reference")
    p.add_argument("--rotate", action="store_true", help="replace the secret with a new one")
    p.set_defaults(func=_webhook, sync=True)

    p = sub.add_parser(
        "db",
        help="the store of transcripts, records, profiles, tokens, secrets and payloads",
        description="migrate: bring the schema up to date (idempotent); status: backend, schema "
        "version, row counts; import: copy data of the older file layout (default: the data "
        "dir) into the store (idempotent). AGENTLANE_DATABASE_URL chooses PostgreSQL; unset, "
        "the embedded SQLite file in the data dir.",
    )
    p.add_argument("action", choices=["migrate", "status", "import"])
    p.add_argument("--from", dest="source", help="import: the old data dir (default: the data dir)")
    p.set_defaults(func=_db)

    p = sub.add_parser("server", help="the embedded Temporal dev server")
    p.add_argument("action", choices=["start", "stop", "status", "restart"])
    p.set_defaults(func=_server, sync=True)

    p = sub.add_parser("worker", help="run a worker process")
    p.add_argument(
        "--host-id",
        help="this host's id (env AGENTLANE_HOST_ID; default the hostname): sessions whose "
        "workspace is on this host's disk run their tools here",
    )
    p.add_argument(
        "--workspaces",
        choices=["host", "shared"],
        help="host: each workspace is on one host's disk, tools run there (the default); "
        "shared: one filesystem on every worker, tools run anywhere (env AGENTLANE_WORKSPACES)",
    )
    p.set_defaults(func=_worker, sync=True)

    p = sub.add_parser(
        "gateway",
        help="run the HTTP gateway for chat adapters; `gateway token ...`: its bearer tokens",
        description="Without a subcommand: serve the HTTP gateway (API reference at "
        "/openapi.json). `token create|list|revoke`: the bearer tokens it accepts.",
    )
    p.add_argument(
        "--host", help="address to listen on (default AGENTLANE_GATEWAY_HOST, 127.0.0.1)"
    )
    p.add_argument(
        "--port", type=int, help="port to listen on (default AGENTLANE_GATEWAY_PORT, 8787)"
    )
    gw_sub = p.add_subparsers(dest="gateway_command")
    t = gw_sub.add_parser("token", help="create, list or revoke bearer tokens")
    t.add_argument("action", choices=["create", "list", "revoke"])
    t.add_argument("token_id", nargs="?", help="for revoke: the token's id (from `token list`)")
    t.add_argument(
        "--prefix",
        action="append",
        help="limit the token to session keys starting with this (repeatable), e.g. slack:T1:",
    )
    t.add_argument("--read-only", action="store_true", help="GET only: status, events, transcript")
    t.add_argument("--name", help="a name to recognise the token by (e.g. the adapter's)")
    p.set_defaults(func=_gateway, sync=True)

    p = sub.add_parser("demo", help="start everything and run one agent session end to end")
    p.add_argument("--session", default="demo")
    p.add_argument(
        "--serve",
        action="store_true",
        help="keep the worker and gateway running after the session (until Ctrl-C)",
    )
    p.set_defaults(func=_demo, sync=True)
    return parser


def _schedule_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "schedule",
        help="send a message to a session at set times (Temporal Schedules; runs have source cron)",
        description="Each firing sends the message to the session like a chat message (creating "
        "the session if needed); its run has source `cron`, no LLM idle limit unless the session "
        "sets one, and the usual 48 h budget. With --overlap skip (the default) a firing due while "
        "the last one's run is still going is skipped and counted. A firing missed while the "
        "server was down runs when it is back if that is within --catchup-window (default 10m).",
    )
    sched = p.add_subparsers(dest="schedule_command", required=True)
    c = sched.add_parser("create", help="create a schedule")
    c.add_argument("schedule_id")
    c.add_argument("--session", required=True, help="the session key the message goes to")
    c.add_argument("--message", required=True, help="the message text")
    when = c.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help="a cron string, e.g. '0 9 * * 1-5' or @hourly (UTC)")
    when.add_argument("--every", help="an interval: 30s, 15m, 1h, 1d, 1h30m")
    c.add_argument(
        "--overlap",
        default="skip",
        help="when the last firing's run is still going: skip (default), buffer_one, "
        "buffer_all, allow_all",
    )
    c.add_argument(
        "--catchup-window",
        help="how late a firing missed during a server outage may still run (default 10m)",
    )
    c.add_argument("--paused", action="store_true", help="create it paused")
    c.add_argument("--note", help="a note shown with the schedule (no secrets)")
    c.add_argument("--workspace", help="workspace folder (used if the firing creates the session)")
    c.add_argument("--model", help="provider/model (used if the firing creates the session)")
    sched.add_parser("list", help="this deployment's schedules")
    for name, text in (
        ("describe", "timing, next firings, recent firings and their runs, skip counts"),
        ("pause", "stop firing until unpaused"),
        ("unpause", "resume firing"),
        ("trigger", "fire once now"),
        ("delete", "delete the schedule"),
    ):
        a = sched.add_parser(name, help=text)
        a.add_argument("schedule_id")
        if name in ("pause", "unpause"):
            a.add_argument("--note", help="why (shown by describe)")
        if name == "describe":
            a.add_argument("--json", action="store_true")
    p.set_defaults(func=_schedule)


def _is_config_error(err: BaseException) -> bool:
    from agentlane.config import ConfigError

    return isinstance(err, ConfigError)


def _error_line(err: BaseException) -> str:
    """What went wrong, in a line an operator can act on."""
    if _is_config_error(err):
        return f"{err} (`agentlane config check` checks the file)"
    if isinstance(err, KeyError) and "binary/encrypted" in str(err):
        return (
            "this deployment's payloads are encrypted and this process has no key to read "
            "them: set AGENTLANE_ENCRYPTION_KEYS_FILE to the keys file, as for the workers "
            "(what was sent may have been accepted: check with `agentlane transcript`)"
        )
    return f"{type(err).__name__}: {err}"


def _value_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every `--name` in any subcommand that takes exactly one value."""
    names: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                names |= _value_options(child)
        elif action.nargs is None and action.option_strings:
            names.update(o for o in action.option_strings if o.startswith("--"))
    return names


def _negative_values_joined(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`--every -5m` as `--every=-5m`: argparse reads a value starting with a dash as the next
    option and says only "expected one argument"; joined, the value reaches its own check,
    which says what is wrong with it."""
    options = _value_options(parser)
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        following = argv[i + 1] if i + 1 < len(argv) else ""
        if (
            word in options
            and len(following) > 1
            and following[0] == "-"
            and following[1].isdigit()
        ):
            out.append(f"{word}={following}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def main(argv: list[str] | None = None) -> None:
    from agentlane.encryption_required import EncryptionRequired
    from clients.api_errors import NoWorker, SessionNotFound

    parser = build_parser()
    args = parser.parse_args(
        _negative_values_joined(parser, sys.argv[1:] if argv is None else argv)
    )
    try:
        code = args.func(args) if getattr(args, "sync", False) else asyncio.run(args.func(args))
    except EncryptionRequired as err:
        print(f"error: {err}", file=sys.stderr)
        code = EXIT_ERROR
    except BrokenPipeError:
        # The reader of stdout went away (`| head`): not an error of ours nor the server's.
        # Python's documented way: point stdout at devnull so the exit flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    except InvalidSessionKey as err:
        print(f"error: {err}", file=sys.stderr)
        code = EXIT_REJECTED
    except SessionNotFound as err:
        print(f"error: {err}", file=sys.stderr)
        code = EXIT_NOT_FOUND
    except NoWorker as err:
        print(str(err), file=sys.stderr)
        code = EXIT_NO_WORKER
    except (ConnectionError, OSError) as err:
        print(f"error: cannot reach the Temporal server: {err}", file=sys.stderr)
        code = EXIT_UNREACHABLE
    except KeyboardInterrupt:
        code = 130
    except RuntimeError as err:
        if "Failed client connect" not in str(err):
            raise
        # The SDK says this for a server that is down or an address that is wrong; name the
        # address this command used (`--address` when given).
        from agentlane.settings import Settings

        address = getattr(args, "address", None) or Settings.from_env().temporal_address
        print(
            f"error: cannot reach the Temporal server at {address}: start the "
            "dev server with `agentlane server start`, or set AGENTLANE_TEMPORAL_ADDRESS",
            file=sys.stderr,
        )
        code = EXIT_UNREACHABLE
    except Exception as err:  # a CLI prints a clear line, not a traceback
        if os.environ.get("AGENTLANE_DEBUG"):
            raise
        print(f"error: {_error_line(err)}", file=sys.stderr)
        code = EXIT_REJECTED if _is_config_error(err) else 1
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = code or EXIT_BROKEN_PIPE
    sys.stderr.flush()
    # The SDK's runtime can crash at interpreter exit in short-lived scripts (sdk-python#300).
    os._exit(code)


if __name__ == "__main__":
    main()
