"""The offline model's "thinking": a deterministic planner over simple instructions.

It is a stand-in for demos and tests, not a language model. It reads the latest user message,
splits it into clauses and maps each clause to a tool call or a piece of text:

    read <path>                          -> read
    write <path> with <text>             -> write   (also: write "<text>" to <path>)
    edit <path> replacing <a> with <b>   -> edit
    run `<command>` / exec `<command>`   -> exec
    sleep <seconds>                      -> exec sleep
    summarize <path> into <path>         -> read, then write a summary of what was read
    apply this patch: *** Begin Patch … *** End Patch  -> apply_patch (the patch may span lines)
    start `<command>` in the background  -> process start
    poll <id> [for <n> seconds]          -> process poll (waiting up to n seconds)
    send "<text>" to <id> [and close]    -> process write (and close its stdin)
    kill <id>                            -> process kill
    list processes                       -> process list
    (<id>: a process id such as proc-1, or "it" for the one this message started last)
    count to <n> [slowly]                -> text "1 2 3 …" (slowly: 50 ms per number)
    say <text>                           -> text
    spawn a sub-agent to <task>          -> sessions_spawn (quote a task that has clauses)
    spawn <n> sub-agents to <task>       -> n sessions_spawn calls in one message

Clauses are separated by "then", ";" or new lines (not inside quotes or backticks). Steps whose
results are already in the transcript are skipped, so the plan advances one tool call per model
call and resumes correctly after a crash.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any

from agentlane.transcript import Role, TranscriptEntry


@dataclass(frozen=True)
class PlannedTool:
    name: str
    arguments: dict[str, Any]
    # Steps with the same group are called together, in one message (parallel sub-agents).
    group: int | None = None


@dataclass(frozen=True)
class PlannedText:
    text: str
    slow: bool = False


@dataclass
class Plan:
    steps: list[PlannedTool | PlannedText] = field(default_factory=list)
    # summarize <src> into <dst>: the write's content is computed once <src> has been read.
    derived_writes: dict[int, tuple[int, str]] = field(default_factory=dict)

    @functools.cached_property
    def tool_steps(self) -> list[int]:
        """The positions of the tool steps (a plan is shared and never changed once made)."""
        return [i for i, step in enumerate(self.steps) if isinstance(step, PlannedTool)]


_SPLIT = re.compile(r"\s*(?:\bthen\b|;|\n)\s*", re.IGNORECASE)
_QUOTED = r"(?:\"([^\"]*)\"|'([^']*)'|`([^`]*)`)"


def split_clauses(text: str) -> list[str]:
    """Split on separators that are not inside quotes or backticks."""
    clauses: list[str] = []
    buf: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            buf.append(ch)
            if ch == quote:
                quote = None
            i += 1
            continue
        if ch in "\"'`" and (ch != "'" or not (buf and buf[-1].isalnum())):
            quote = ch
            buf.append(ch)
            i += 1
            continue
        match = _SPLIT.match(text, i)
        if match and match.end() > i and (ch in ";\n" or match.group(0).strip().lower() == "then"):
            if "".join(buf).strip():
                clauses.append("".join(buf).strip())
            buf = []
            i = match.end()
            continue
        buf.append(ch)
        i += 1
    if "".join(buf).strip():
        clauses.append("".join(buf).strip())
    return [c.rstrip(".").strip() for c in clauses if c.rstrip(".").strip()]


def _unquote(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'`":
        return raw[1:-1]
    return raw


_PROC = r"(it|proc-\d+)"
# Stands for the process this message started last; the offline model fills in its id.
LAST_PROCESS = "@last"


def _proc_id(raw: str) -> str:
    return LAST_PROCESS if raw.lower() == "it" else raw


_PATCH = re.compile(
    r"apply\s+(?:this\s+|the\s+following\s+|the\s+)?patch\s*:?\s*"
    r"(\*\*\* Begin Patch\n.*?\n\*\*\* End Patch)",
    re.IGNORECASE | re.S,
)


def _clause_steps(clause: str) -> list[PlannedTool | PlannedText]:
    c = clause.strip()
    low = c.lower()
    if m := re.match(r"(?:read|open|show)\s+(?:the\s+file\s+)?(\S+)$", c, re.IGNORECASE):
        return [PlannedTool("read", {"path": _unquote(m.group(1))})]
    if m := re.match(rf"(?:write|create)\s+{_QUOTED}\s+(?:to|into|in)\s+(\S+)$", c, re.I):
        content = next(g for g in m.groups()[:3] if g is not None)
        return [PlannedTool("write", {"path": _unquote(m.group(4)), "content": content})]
    if m := re.match(r"(?:write|create)\s+(\S+)\s+(?:with|containing)\s+(.+)$", c, re.I | re.S):
        return [
            PlannedTool("write", {"path": _unquote(m.group(1)), "content": _unquote(m.group(2))})
        ]
    # A quoted old string may itself contain " with ": try the quoted form first.
    if m := re.match(
        r"edit\s+(\S+)\s+(?:replacing|replace)\s+(\"[^\"]*\"|'[^']*'|`[^`]*`|.+?)\s+with\s+(.+)$",
        c,
        re.IGNORECASE | re.S,
    ):
        return [
            PlannedTool(
                "edit",
                {
                    "path": _unquote(m.group(1)),
                    "old_string": _unquote(m.group(2)),
                    "new_string": _unquote(m.group(3)),
                },
            )
        ]
    if m := re.match(r"start\s+(.+?)\s+in\s+the\s+background$", c, re.IGNORECASE | re.S):
        return [PlannedTool("process", {"action": "start", "command": _unquote(m.group(1))})]
    if m := re.match(rf"poll\s+{_PROC}(?:\s+for\s+(\d+(?:\.\d+)?)\s*s(?:econds?)?)?$", c, re.I):
        args: dict[str, Any] = {"action": "poll", "id": _proc_id(m.group(1))}
        if m.group(2):
            args["wait_seconds"] = float(m.group(2))
        return [PlannedTool("process", args)]
    if m := re.match(rf"send\s+{_QUOTED}\s+to\s+{_PROC}(\s+and\s+close)?$", c, re.I | re.S):
        text = next(g for g in m.groups()[:3] if g is not None)
        args = {"action": "write", "id": _proc_id(m.group(4)), "input": text}
        if m.group(5):
            args["close_stdin"] = True
        return [PlannedTool("process", args)]
    if m := re.match(rf"kill\s+{_PROC}$", c, re.I):
        return [PlannedTool("process", {"action": "kill", "id": _proc_id(m.group(1))})]
    if re.match(r"list\s+(?:the\s+)?(?:background\s+)?processes$", c, re.I):
        return [PlannedTool("process", {"action": "list"})]
    if m := re.match(r"(?:run|exec|execute)\s+(.+)$", c, re.IGNORECASE | re.S):
        return [PlannedTool("exec", {"command": _unquote(m.group(1))})]
    if m := re.match(r"sleep\s+(\d+(?:\.\d+)?)", low):
        return [PlannedTool("exec", {"command": f"sleep {m.group(1)}"})]
    if m := re.match(r"count\s+(slowly\s+)?to\s+(\d+)(\s+slowly)?$", low):
        n = min(int(m.group(2)), 100_000)
        return [
            PlannedText(
                " ".join(str(i) for i in range(1, n + 1)), slow=bool(m.group(1) or m.group(3))
            )
        ]
    if m := re.match(
        r"spawn\s+(a|an|one|\d+)\s+sub-?agents?(?:\s+of\s+(?:agent\s+)?(\S+))?\s+to\s+(.+)$",
        c,
        re.IGNORECASE | re.S,
    ):
        count = 1 if not m.group(1).isdigit() else max(1, min(int(m.group(1)), 16))
        args = {"task": _unquote(m.group(3))}
        if m.group(2):
            args["agentId"] = m.group(2)
        group = zlib.crc32(c.encode()) if count > 1 else None
        return [PlannedTool("sessions_spawn", dict(args), group) for _ in range(count)]
    if m := re.match(r"say\s+(.+)$", c, re.IGNORECASE | re.S):
        return [PlannedText(_unquote(m.group(1)))]
    return []


@functools.lru_cache(maxsize=256)
def make_plan(instruction: str) -> Plan:
    """The plan for an instruction, parsed once (a run asks for it on every call; the offline
    model should cost next to nothing). Shared: callers must not modify it."""
    plan = Plan()
    # A patch spans lines (which otherwise separate steps): each is set aside whole first.
    patches: list[str] = []

    def hold(m: re.Match[str]) -> str:
        patches.append(m.group(1))
        return f"apply patch #{len(patches) - 1}"

    instruction = _PATCH.sub(hold, instruction.replace("\r\n", "\n"))
    for clause in split_clauses(instruction):
        if m := re.match(r"apply patch #(\d+)$", clause):
            plan.steps.append(PlannedTool("apply_patch", {"input": patches[int(m.group(1))]}))
            continue
        m = re.match(r"summari[sz]e\s+(\S+)\s+(?:into|to|in)\s+(\S+)$", clause, re.IGNORECASE)
        if m:
            read_index = len(plan.steps)
            plan.steps.append(PlannedTool("read", {"path": _unquote(m.group(1))}))
            plan.derived_writes[len(plan.steps)] = (read_index, _unquote(m.group(2)))
            plan.steps.append(PlannedTool("write", {"path": _unquote(m.group(2)), "content": ""}))
            continue
        plan.steps.extend(_clause_steps(clause))
    return plan


def summarize_text(source: str, text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("… [")]
    words = sum(len(ln.split()) for ln in lines)
    first = lines[0].strip() if lines else "(empty)"
    return (
        f"Summary of {source}: {len(lines)} non-empty lines, {words} words. First line: {first}\n"
    )


@dataclass(frozen=True)
class Progress:
    instruction: str
    tool_results: list[TranscriptEntry]
    assistant_turns: int
    # The id of the user message being answered ("" when there is none).
    last_user_id: str = ""


_ROLE = attrgetter("role")
_IS_TOOL = Role.TOOL.__eq__


def progress_since_last_user(entries: list[TranscriptEntry]) -> Progress:
    # Every pass over the context runs in C (`map`, `list.index`, `compress`): the stand-in
    # model should cost what a provider's would, not a Python loop over the whole context per
    # call (a run's instruction is its first entry, so the walk back to it is the whole run).
    roles = list(map(_ROLE, entries))
    try:
        last_user = len(roles) - 1 - roles[::-1].index(Role.USER)
    except ValueError:
        last_user = -1
    return Progress(
        instruction=entries[last_user].text if last_user >= 0 else "",
        tool_results=list(
            compress(entries[last_user + 1 :], map(_IS_TOOL, roles[last_user + 1 :]))
        ),
        assistant_turns=roles.count(Role.ASSISTANT),
        last_user_id=entries[last_user].id if last_user >= 0 else "",
    )
