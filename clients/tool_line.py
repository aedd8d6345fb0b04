"""One short line saying what a tool call does, from its arguments (the `⚙ tool …` line of the
terminal renderer): the command, the path, the task; for apply_patch the files it touches, for
process the action and its command or process id."""

from __future__ import annotations

from collections.abc import Mapping

LIMIT = 100
# apply_patch's file headers (activities/tools/apply_patch.py), and what each does to its file.
PATCH_HEADERS = (
    ("*** Add File: ", "add"),
    ("*** Update File: ", "update"),
    ("*** Delete File: ", "delete"),
    ("*** Move to: ", "→"),
)


def patch_files(patch: str) -> str:
    """`update a.py → b.py, add c.txt`: each file the patch names, with what it does to it."""
    parts: list[str] = []
    for line in patch.splitlines():
        for header, verb in PATCH_HEADERS:
            if line.startswith(header):
                path = line[len(header) :].strip()
                if verb == "→" and parts:
                    parts[-1] += f" → {path}"
                else:
                    parts.append(f"{verb} {path}")
    if patch.rstrip().endswith("more characters]"):
        # The stream carries a long patch cut short (activities/tool_calls.preview_args): the
        # files after the cut are not named.
        parts.append("…")
    return ", ".join(parts)


def _process(args: Mapping[str, object]) -> str:
    action = str(args.get("action") or "")
    target = args.get("command") if action == "start" else args.get("id")
    return f"{action} {target}" if target else action


def tool_input_preview(tool_name: str | None, args: object) -> str:
    if not isinstance(args, Mapping):
        return ""
    if tool_name == "apply_patch":
        detail: object = patch_files(str(args.get("input") or ""))
    elif tool_name == "process":
        detail = _process(args)
    else:
        detail = args.get("command") or args.get("path") or args.get("task") or ""
    text = " ".join(str(detail).split())
    return text if len(text) < LIMIT else text[: LIMIT - 3] + "…"
