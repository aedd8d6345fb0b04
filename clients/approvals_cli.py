"""`agentlane approvals <key>` and `agentlane approve <key> <id> [--deny] [--reason TEXT]`
(issue 21): list the tool calls waiting for a person's yes, and decide one."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the parser is built for every command: no pydantic contracts for it
    from agentlane.approvals import PendingApproval

EXIT_OK = 0
EXIT_REJECTED = 2


def approval_line(approval: PendingApproval, now: float | None = None) -> str:
    """One pending approval, its id first: `<id>  <tool>  expires in 95 s  <args preview>`; a
    sub-agent's names its session after the tool."""
    left = max(0, int(approval.expires_at - (time.time() if now is None else now)))
    who = f" (sub-agent {approval.session_key})" if approval.session_key else ""
    return (
        f"{approval.id}  {approval.tool}{who}  expires in {left} s "
        f"(then {approval.on_timeout.value})  {approval.args_preview}"
    )


async def _approvals(args: argparse.Namespace) -> int:
    from clients.api import AgentlaneClient

    client = await AgentlaneClient.connect()
    pending = await client.approvals(args.session)
    if args.json:
        for approval in pending:
            print(approval.model_dump_json())
        return EXIT_OK
    if not pending:
        print(f"no approvals waiting in session {args.session}", file=sys.stderr)
    for approval in pending:
        print(approval_line(approval))
    return EXIT_OK


async def _approve(args: argparse.Namespace) -> int:
    import getpass

    from clients.api import AgentlaneClient, ApprovalRejected

    client = await AgentlaneClient.connect()
    try:
        receipt = await client.decide_approval(
            args.session,
            args.id,
            approve=not args.deny,
            reason=args.reason,
            by=f"cli:{getpass.getuser()}",
        )
    except ApprovalRejected as err:
        print(f"rejected: {err}", file=sys.stderr)
        return EXIT_REJECTED
    line = f"approval {receipt.id} ({receipt.tool}): {receipt.outcome.value}"
    print(f"{line}; {receipt.note}" if receipt.note else line)
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "approvals", help="tool calls waiting for a person's yes, one a line, its id first"
    )
    p.add_argument("session")
    p.add_argument("--json", action="store_true", help="one JSON object per approval")
    p.set_defaults(func=_approvals)

    p = sub.add_parser("approve", help="approve (or --deny) a waiting tool call")
    p.add_argument("session")
    p.add_argument("id", help="the approval id (`agentlane approvals SESSION`)")
    p.add_argument("--deny", action="store_true", help="deny it: the call is not run")
    p.add_argument("--reason", default="", help="told to the model with a denial")
    p.set_defaults(func=_approve)
