"""No policy written and never called (issue 24).

A rule implemented in a pure module and tested there, but never reached from a run, a session
or a client, is a stub called done. Static check: every public function of `workflows/policy/`
and `activities/context/` must be used (called, or passed on) somewhere outside `tests/`,
other than in its own body. Imports and `__all__` do not count as a use.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY_PACKAGES = ("workflows/policy", "activities/context")
SKIPPED_DIRS = {"tests", ".venv", "node_modules", ".git", "build", "dist"}


def _sources() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*.py")
        if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts[:-1])
    ]


def _public_functions() -> dict[tuple[str, str], ast.FunctionDef | ast.AsyncFunctionDef]:
    found: dict[tuple[str, str], ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for package in POLICY_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not (
                    node.name.startswith("_")
                ):
                    found[(str(path.relative_to(ROOT)), node.name)] = node
    return found


def _uses(tree: ast.AST, skip: set[int]) -> Counter[str]:
    """Names read anywhere in `tree` (plain names and attributes), except inside the nodes
    whose ids are in `skip` (a function's own body)."""
    counts: Counter[str] = Counter()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if id(node) in skip:
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            counts[node.id] += 1
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            counts[node.attr] += 1
        stack.extend(ast.iter_child_nodes(node))
    return counts


def unwired() -> list[str]:
    functions = _public_functions()
    own_bodies = {id(node) for node in functions.values()}
    used: Counter[str] = Counter()
    for path in _sources():
        used += _uses(ast.parse(path.read_text(), str(path)), own_bodies)
    return sorted(f"{path}:{name}" for path, name in functions if not used[name])


def test_every_public_policy_function_is_reached_outside_the_tests() -> None:
    assert unwired() == []


def test_the_check_sees_a_function_nothing_calls(tmp_path: Path) -> None:
    """The check itself can fail: a function used only in its own body is reported."""
    source = "def lonely(n):\n    return lonely(n - 1) if n else 0\n\ndef used():\n    pass\n"
    tree = ast.parse(source)
    lonely = tree.body[0]
    counts = _uses(tree, {id(lonely)})
    assert counts["lonely"] == 0
    assert _uses(ast.parse("used()\n"), set())["used"] == 1
