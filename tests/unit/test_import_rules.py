"""Imports among SGAM's own modules: no cycle, and no private name taken from another module.

The rule (README, "Layout"): the modules' top-level imports form no cycle. An import inside a
function is lazy: it runs after every module has loaded, so it cannot close a cycle at import time;
it is how optional extras and the CLI's heavy commands load. A name starting with ``_`` is private
to its module: another module that needs it gets a public name instead.

Read from the source with :mod:`ast` (nothing is imported), so a cycle is reported as a cycle, not
as the ImportError it would cause.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Import package -> folder (pyproject.toml [tool.setuptools.package-dir]).
FOLDERS = {"sgam": "sgam", "sgam.graph": "graph", "sgam.ingest": "ingest", "sgam.queries": "queries"}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


MODULES = _modules()


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _imports(module: str) -> list[tuple[ast.stmt, bool]]:
    """Every import statement of ``module``, and whether it runs when the module loads."""
    tree = ast.parse(MODULES[module].read_text(), str(MODULES[module]))
    found: list[tuple[ast.stmt, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, top))
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, False)   # read by type checkers only
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            else:
                visit(child, top)

    visit(tree, True)
    return found


def _targets(module: str, node: ast.stmt) -> list[tuple[str, str | None]]:
    """(our module imported, the name taken from it or None) for one import statement."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names if a.name in MODULES]
    assert isinstance(node, ast.ImportFrom)
    source = _absolute(module, node)
    if source not in MODULES:
        return []
    return [(f"{source}.{a.name}", None) if f"{source}.{a.name}" in MODULES else (source, a.name)
            for a in node.names]


def test_the_scan_sees_every_package() -> None:
    assert {"sgam.api", "sgam.graph.store", "sgam.ingest.pipeline", "sgam.queries.loader"} <= set(MODULES)


def test_no_import_cycle_among_top_level_imports() -> None:
    edges = {m: sorted({t for node, top in _imports(m) if top for t, _ in _targets(m, node)} - {m})
             for m in MODULES}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}   # 1: on the current path, 2: done
    path: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in edges[m]:
            if state.get(t) == 1:
                cycles.append(path[path.index(t):] + [t])
            elif t not in state:
                walk(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            walk(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)




def test_no_private_name_imported_from_another_module() -> None:
    found = {f"{m} takes {name} from {source}"
             for m in MODULES for node, _ in _imports(m) for source, name in _targets(m, node)
             if name and name.startswith("_") and not name.startswith("__") and source != m}
    assert not found, "private names imported across modules: " + "; ".join(sorted(found))
