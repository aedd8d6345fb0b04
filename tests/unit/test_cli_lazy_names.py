"""The CLI imports most names inside the commands that use them (a fast `--help`, issue 22), and
the client API its workflow and activity code inside the methods that use it; names imported
only for type checking are undefined at run time: a command that uses one without its own
import fails with NameError, which neither ruff nor mypy sees. This reads the modules and finds
such uses."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "clients" / "cli.py"
API = CLI.with_name("api.py")


def _bound(nodes: list[ast.stmt]) -> set[str]:
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            out |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return out


def _type_checking_only(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            names |= _bound(node.body)
    return names - _bound(tree.body)


def _annotations(fn: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            for arg in args:
                if arg.annotation is not None:
                    out |= {id(n) for n in ast.walk(arg.annotation)}
            if node.returns is not None:
                out |= {id(n) for n in ast.walk(node.returns)}
        elif isinstance(node, ast.AnnAssign):
            out |= {id(n) for n in ast.walk(node.annotation)}
    return out


def unbound_uses(source: str) -> list[str]:
    tree = ast.parse(source)
    lazy = _type_checking_only(tree)
    found = []
    methods = [n for c in tree.body if isinstance(c, ast.ClassDef) for n in c.body]
    for fn in [*tree.body, *methods]:
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        skip = _annotations(fn)
        local = _bound([n for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom)])
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id in lazy - local
                and id(node) not in skip
            ):
                found.append(f"{fn.name} uses {node.id} (line {node.lineno})")
    return found


def test_every_command_imports_the_names_it_uses() -> None:
    assert unbound_uses(CLI.read_text()) == []


def test_every_client_method_imports_the_names_it_uses() -> None:
    assert unbound_uses(API.read_text()) == []


def test_the_check_finds_a_missing_import() -> None:
    source = (
        "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agentlane.settings import Settings\n"
        "def ok(s: Settings) -> Settings:\n    from agentlane.settings import Settings\n"
        "    return Settings.from_env()\n"
        "def bad() -> None:\n    Settings.from_env()\n"
    )
    assert unbound_uses(source) == ["bad uses Settings (line 9)"]
