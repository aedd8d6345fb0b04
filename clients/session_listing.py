"""`agentlane sessions` filtered by search attributes (issue 12): its options, and its lines."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from agentlane import search_attribute_defs as sa
from agentlane.session_query import PHASES, BadFilter, SessionFilter

if TYPE_CHECKING:  # the parser is built for every command: no Temporal client import for it
    from clients.api import AgentlaneClient

HEADER = "key\tworkflow\tphase\tmodel\tturns\ttokens\tcost\tlast error\tstarted"


def add_filter_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--phase",
        choices=PHASES,
        help="idle / running; waiting (its run waits: a cooling profile, an approval) / compacting",
    )
    for attr in sa.ALL:
        if attr.option is None or attr.option in ("phase", "session"):
            continue
        p.add_argument(f"--{attr.option}", help=f"{attr.name}: {attr.help}")
    p.add_argument("--all", action="store_true", dest="include_closed", help="closed sessions too")
    p.add_argument(
        "--query",
        action="store_true",
        dest="show_query",
        help="print the visibility queries too (what the Temporal UI's search box takes)",
    )


def filter_from(args: argparse.Namespace) -> SessionFilter:
    return SessionFilter(
        phase=args.phase,
        model=args.model,
        error=args.error,
        agent=args.agent,
        channel=args.channel,
        profile=args.profile,
        source=args.source,
        include_closed=args.include_closed,
    )


def line(row: dict[str, object]) -> str:
    cost = row.get("cost_usd")
    cells = [
        row["key"],
        row["status"],
        row.get("phase") or "-",
        row.get("model") or "-",
        row.get("turns") if row.get("turns") is not None else "-",
        row.get("tokens") if row.get("tokens") is not None else "-",
        f"${cost:.4f}" if isinstance(cost, float) else "unpriced",
        row.get("last_error") or "-",
        row["started"],
    ]
    return "\t".join(str(c) for c in cells)


async def list_sessions(client: AgentlaneClient, args: argparse.Namespace) -> int:
    try:
        filters = filter_from(args)
    except BadFilter as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    listing = await client.find_sessions(filters)
    if args.show_query:
        for query in listing.queries:
            print(f"# {query}")
    print(HEADER)
    for row in listing.rows:
        print(line(row))
    return 0
