"""Imports flow one way: catalog and solver are leaves, planner uses both, api on top.

Inside ``api``: the front ends (``api.routes``, ``api.cli``) are thin layers over
``api.services``; only services (and the app factory ``api.main``) reach the
database layer ``api.db``. And no module imports another that imports it back,
counting imports inside function bodies (docs/design.md, "Map of the house").
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {"catalog", "planner", "solver", "api", "migrations"}
ALLOWED = {
    "catalog": set(),
    "solver": set(),
    "planner": {"catalog", "solver"},
    "api": {"catalog", "solver", "planner", "migrations"},
}
#: What the front ends may not import (besides each other), and why.
FRONT_ENDS = ("api.routes", "api.cli")
FORBIDDEN_FOR_FRONT_ENDS = {
    "api.db": "queries live in api.db and only services run them",
    # the pipeline: planning, re-planning, simulating and comparing go through services
    "planner.service": "plan through api.services.plans",
    "planner.problem_build": "plan through api.services.plans",
    "planner.compare": "compare through api.services.comparisons",
    "planner.simulate": "simulate through api.services.plans",
    "planner.calibration": "resolve calibrations through api.services.calibrations",
    "planner.report.render": "render reports through api.services.reports",
    "planner.sensitivity": "compute a report's sensitivity through api.services.reports",
}
#: What a report may not import: reports render what was planned, they never plan.
PLANNING = (
    "planner.service",
    "planner.compare",
    "planner.sensitivity",
    "solver.solve",
    "solver.backend",
    "solver.decompose",
    "solver.robust",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {
    _module_name(path): path for package in ALLOWED for path in (ROOT / package).rglob("*.py")
}


def _imports(path: Path) -> Iterator[str]:
    """Every module named by an import anywhere in the file (function bodies too),
    absolute; ``from package import name`` names ``package.name`` when that is a
    module, else ``package``."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                name = f"{target}.{alias.name}"
                yield name if name in MODULES else target


def _project_module(name: str) -> str | None:
    """The project module ``name`` refers to (its longest known prefix), if any."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imported_packages(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _imports(path)} & PROJECT


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_flow_one_way(package):
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        extra = imported_packages(path) - ALLOWED[package] - {package}
        if extra:
            bad.append(f"{path.relative_to(ROOT)} imports {sorted(extra)}")
    assert not bad, bad


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_reports_render_and_never_plan():
    bad = [
        f"{module} imports {name}"
        for module, path in sorted(MODULES.items())
        if _within(module, "planner.report")
        for name in set(_imports(path))
        if any(_within(name, p) for p in PLANNING)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_front_ends_go_through_services(front_end):
    """Routes and the CLI never import each other or the database layer, nor the
    planner's pipeline: they call api.services."""
    others = [f for f in FRONT_ENDS if f != front_end]
    bad = []
    for module, path in sorted(MODULES.items()):
        if not _within(module, front_end):
            continue
        for name in set(_imports(path)):
            for other in others:
                if _within(name, other):
                    bad.append(f"{module} imports {name} (the other front end)")
            for forbidden, why in FORBIDDEN_FOR_FRONT_ENDS.items():
                if _within(name, forbidden):
                    bad.append(f"{module} imports {name}: {why}")
    assert not bad, bad


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        targets = {_project_module(name) for name in _imports(path)}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    """No module imports (at the top or inside a function) a module that imports it
    back, directly or through others. A package's ``__init__`` counts as a module
    (importing a submodule is not counted as importing its package)."""
    assert import_cycles(import_graph()) == []


def test_the_cycle_check_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


#: Reading the environment: settings are read once, in ``api/settings.py``.
ENV_READ = re.compile(r"\bos\.environ\b|\bgetenv\b|\benviron\.get\b")


@pytest.mark.parametrize("package", ["planner", "solver", "catalog"])
def test_the_domain_reads_no_environment(package):
    """``FLEETPLAN_*`` settings are read once, by ``api.settings.Settings``, and passed
    down as arguments: no module of the planner, the solver or the catalog reads an
    environment variable (a source scan, so an indirect ``os.environ`` counts too)."""
    bad = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if ENV_READ.search(line)
    ]
    assert not bad, bad


#: The largest a source module may grow (lines, as ``wc -l`` counts them): past it, a
#: module is doing several jobs (docs/design.md, "Map of the house").
MAX_MODULE_LINES = 700
#: Modules still over the limit, each with why and who splits it (empty when none is).
OVER_THE_LIMIT: dict[str, str] = {}


def test_no_source_module_is_over_700_lines():
    """No ``.py`` file of the packages, the scripts or the benchmarks is longer than
    :data:`MAX_MODULE_LINES` (tests may be)."""
    long = {
        str(path.relative_to(ROOT)): n
        for package in (*ALLOWED, "scripts", "bench")
        for path in sorted((ROOT / package).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert {p: n for p, n in long.items() if p not in OVER_THE_LIMIT} == {}
    assert set(OVER_THE_LIMIT) <= set(long), "split: drop it from OVER_THE_LIMIT"
