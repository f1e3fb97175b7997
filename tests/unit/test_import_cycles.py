"""No import cycle among memgov_pg's modules, counting imports inside functions too.

A cycle that only works because one side imports late is still a cycle: the two
modules cannot be understood, tested or moved apart. The test reads every module's
imports with ``ast`` (top level, inside functions, under ``TYPE_CHECKING``) and names
each cycle it finds, edge by edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "memgov_pg"


def _modules(package: Path) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name, not ``__init__``)."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent)
        if any(part.startswith(".") for part in relative.parts) or relative.parts[1:2] == ("alembic",):
            continue  # memgov_pg/alembic is the repository's alembic/ (Alembic loads it by path)
        parts = list(relative.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The package's modules ``name`` imports, each with the line of its first import."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from . import x` imports the module x; `from .m import f` imports m
            targets = [source, *(f"{source}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            # `import a.b.c` runs a.b.c; a name imported from a module is that module
            while target and target not in modules:
                target = target.rpartition(".")[0] if target.count(".") > 1 else ""
            if target and target != name:
                edges.setdefault(target, node.lineno)
    return edges


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    modules = _modules(PACKAGE)
    # a package's __init__ importing its own submodules is how a package is built, not a cycle
    graph = {
        name: {t: line for t, line in _imported(name, path, modules).items() if not t.startswith(f"{name}.")}
        for name, path in modules.items()
    }
    return modules, graph


def test_the_reader_sees_the_package():
    modules, graph = _graph()
    assert {"memgov_pg.db", "memgov_pg.cluster", "memgov_pg.cli.dsn", "memgov_pg.status"} <= set(modules)
    assert "memgov_pg.db" in graph["memgov_pg.cluster"]  # a function-local import counts
    assert "memgov_pg.status" in graph["memgov_pg.cli.server"]


def test_no_import_cycle():
    modules, graph = _graph()
    problems = []
    for component in _cycles(graph):
        members = set(component)
        edges = [
            f"  {a} -> {b} ({modules[a].relative_to(PACKAGE.parent)}:{graph[a][b]})"
            for a in component
            for b in sorted(graph[a])
            if b in members
        ]
        problems.append("import cycle among " + ", ".join(component) + ":\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


def test_a_cycle_is_reported(tmp_path):
    """The reader finds a cycle that only a function-local import closes."""
    (tmp_path / "a.py").write_text("from .b import f\n")
    (tmp_path / "b.py").write_text("def f():\n    from .a import g\n")
    modules = {"p.a": tmp_path / "a.py", "p.b": tmp_path / "b.py"}
    graph = {name: _imported(name, path, modules) for name, path in modules.items()}
    assert graph == {"p.a": {"p.b": 1}, "p.b": {"p.a": 2}}
    assert _cycles(graph) == [["p.a", "p.b"]]
