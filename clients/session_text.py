"""How `agentlane transcript` and `agentlane sessions tree` print (issue 10). Pure: entries and
tree nodes in, lines out.

A transcript shows entry ids (what `agentlane branch --from` takes), and the engine's markers as
one line each ("── reset ──", "── compacted: N entries summarised ──"): they shape what the model
is sent, they are not messages. By default only the current branch is shown (from the latest
reset on); `--all` shows the whole file, old branches included.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from activities.branch_history import current_branch
from agentlane.branches import ResetMark, TreeNode
from agentlane.transcript import CHAT_ROLES, Role, TranscriptEntry
from clients.terminal_text import printable

RULE = "──"


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "?"


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _summarised(entries: Sequence[TranscriptEntry], index: int) -> int:
    """How many entries a compaction marker replaced: what it recorded, else the chat entries of
    its branch before the first one it kept."""
    marker = entries[index]
    recorded = _count(marker.meta.get("summarized"))
    if recorded is not None:
        return recorded
    start = 0
    for i in range(index - 1, -1, -1):
        if entries[i].role == Role.RESET:
            start = i + 1
            break
    first_kept = marker.meta.get("first_kept_id")
    end = next(
        (i for i in range(start, index) if entries[i].id == first_kept),
        index,
    )
    return sum(1 for e in entries[start:end] if e.role in CHAT_ROLES)


def marker_line(entries: Sequence[TranscriptEntry], index: int) -> str:
    """One line for a marker entry, with its id and time."""
    entry = entries[index]
    tail = f"({entry.id}, {when(entry.ts)})"
    if entry.role == Role.RESET:
        by = entry.meta.get("by")
        reason = entry.meta.get("reason")
        who = f", by {by}" if by else ""
        why = f": {reason}" if reason else ""
        return f"{RULE} reset {RULE} ({entry.id}, {when(entry.ts)}{who}{why})"
    if entry.role == Role.COMPACTION:
        n = _summarised(entries, index)
        return f"{RULE} compacted: {n} entries summarised {RULE} {tail}"
    if entry.role == Role.TRUNCATION:
        cut = entry.meta.get("replacements") or entry.meta.get("cuts") or {}
        n = len(cut) if isinstance(cut, dict) else 0
        return f"{RULE} truncated: {n} tool result{'s' if n != 1 else ''} cut to fit {RULE} {tail}"
    if entry.role == Role.DROPPED:
        return f"{RULE} {dropped_words(entry)} {RULE} {tail}"
    if entry.role == Role.BRANCH:
        parent = entry.meta.get("parent_session", "?")
        point = entry.meta.get("branch_point", "?")
        return f"{RULE} branched from {parent} at {point} {RULE} {tail}"
    return f"{RULE} {entry.role.value} {RULE} {tail}"


def dropped_words(entry: TranscriptEntry) -> str:
    """How a message the queue dropped is marked (issue 19): its number, its sender's id, and
    whether it was counted in an overflow summary or dropped outright."""
    meta = entry.meta
    fate = "summarized" if meta.get("fate") == "summarized" else "dropped"
    message_id = meta.get("message_id")
    named = f" #{meta.get('seq', '?')}" + (f" ({message_id})" if message_id else "")
    return (
        f"{fate}: message{named}, queue full "
        f"(cap {meta.get('cap', '?')}, drop:{meta.get('policy', '?')})"
    )


def entry_lines(entries: Sequence[TranscriptEntry], index: int) -> list[str]:
    entry = entries[index]
    if entry.role == Role.DROPPED:
        # Its text is shown: nothing the session accepted is kept out of sight.
        return [marker_line(entries, index), *([printable(entry.text)] if entry.text else [])]
    if entry.role not in CHAT_ROLES:
        return [marker_line(entries, index)]
    head = f"[{entry.role.value}] {entry.id}"
    if entry.tool_call_id:
        head += f" ({entry.tool_name} {entry.tool_call_id}{' error' if entry.is_error else ''})"
    lines = [head]
    if entry.text:
        lines.append(printable(entry.text))
    for call in entry.tool_calls:
        lines.append(f"  → {call.name}({json.dumps(call.arguments)[:200]}) [{call.id}]")
    return lines


def transcript_lines(entries: Sequence[TranscriptEntry], show_all: bool = False) -> list[str]:
    """The transcript as `agentlane transcript` prints it."""
    hidden, shown_from = 0, 0
    if not show_all:
        shown_from, _ = current_branch(entries)
        hidden = shown_from
    lines: list[str] = []
    if hidden:
        lines.append(
            f"({hidden} earlier entr{'ies' if hidden != 1 else 'y'} before the latest reset; "
            "--all shows them)"
        )
    for index in range(shown_from, len(entries)):
        lines.extend(entry_lines(entries, index))
    return lines


# -- the session tree ------------------------------------------------------------------------


def _reset_line(mark: ResetMark, fmt: Callable[[float], str]) -> str:
    after = f" after {mark.after}" if mark.after else ""
    by = f" by {mark.by}" if mark.by else ""
    return f"reset {fmt(mark.ts)} {mark.entry_id}{after}{by}"


def _node_line(node: TreeNode, fmt: Callable[[float], str]) -> str:
    started = f", started {fmt(node.started)}" if node.started else ""
    branched = f", branched at {node.branch_point}" if node.branch_point else ""
    spawned = f", sub-agent of {node.spawned_by}" if node.spawned_by else ""
    return f"{node.key} ({node.status or '?'}{started}){branched}{spawned}"


def subagents_of(nodes: Sequence[TreeNode], key: str) -> list[TreeNode]:
    """The sub-agent sessions a session's runs spawned, and theirs, parents before children."""
    found: list[TreeNode] = []
    parents = {key}
    pending = [n for n in nodes if n.spawned_by is not None]
    while True:
        level = [n for n in pending if n.parent_session in parents and n not in found]
        if not level:
            return found
        level.sort(key=lambda n: (n.started, n.key))
        found += level
        parents |= {n.key for n in level}


def tree_lines(nodes: Sequence[TreeNode], fmt: Callable[[float], str] = when) -> list[str]:
    """Sessions as a tree: branches under their parent with their branch point, and within a
    session its resets (branch points too: each ends the branch before it), in time order. A
    branch whose parent is not listed (closed long ago) is a root that names its parent."""
    by_key = {n.key: n for n in nodes}
    children: dict[str, list[TreeNode]] = {}
    roots: list[TreeNode] = []
    for node in nodes:
        parent = node.parent_session
        if parent is not None and parent in by_key and parent != node.key:
            children.setdefault(parent, []).append(node)
        else:
            roots.append(node)
    lines: list[str] = []
    seen: set[str] = set()

    def walk(node: TreeNode, prefix: str, branch: str, more: str) -> None:
        seen.add(node.key)
        line = _node_line(node, fmt)
        orphan = node.parent_session is not None and node.parent_session not in by_key
        if orphan and node.spawned_by is None:
            line += f" (branch of {node.parent_session})"
        lines.append(prefix + branch + line)
        items: list[tuple[float, str, TreeNode | ResetMark]] = [
            (m.ts, m.entry_id, m) for m in node.resets
        ]
        items += [(c.started, c.key, c) for c in children.get(node.key, []) if c.key not in seen]
        items.sort(key=lambda item: (item[0], item[1]))
        for i, (_, _, item) in enumerate(items):
            last = i == len(items) - 1
            mark, cont = ("└── ", "    ") if last else ("├── ", "│   ")
            if isinstance(item, ResetMark):
                lines.append(prefix + more + mark + _reset_line(item, fmt))
            else:
                walk(item, prefix + more, mark, cont)

    for root in roots:
        walk(root, "", "", "")
    return lines
