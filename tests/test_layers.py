"""The one-way flow of DESIGN.md: workloads -> app.py -> stacks -> constructs_lib. No module imports its caller:
the import graph of the project's own modules has no cycle, and no layer imports one above it."""

from __future__ import annotations

import ast

from .conftest import ROOT

LAYERS = {"workloads": 0, "constructs_lib": 1, "stacks": 2, "app": 3}  # each may import only lower layers and itself
# Inside workloads/, by concept: the facts, errors and caches every part reads; the workload config; planning (the planner
# and its training and serving halves); the commands a user runs. Each imports only its own group and those before.
# The package's own __init__ and __main__ are its entry points, above them all.
WORKLOAD_LAYERS = {"catalog": 0, "errors": 0, "packaged": 0, "method_cache": 0, "config": 1, "planning": 2,
                   "commands": 3, "__init__": 4, "__main__": 4}


def _module(path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    mods = {_module(p): p for pkg in ("workloads", "constructs_lib", "stacks") for p in (ROOT / pkg).rglob("*.py")}
    mods["app"] = ROOT / "app.py"
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                # `from . import speed` loads the submodule (the package's __init__ is lazy: PEP 562)
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs or [base]
            found |= {t for t in targets if t in mods and t != name}
        graph[name] = found
    return graph


def test_no_layer_imports_one_above_it():
    wrong = [f"{a} imports {b}" for a, deps in _imports().items() for b in deps
             if LAYERS[b.split(".")[0]] > LAYERS[a.split(".")[0]]]
    assert not wrong, wrong


def _group(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_workloads_is_grouped_by_concept():
    """Every module of workloads/ is in a group, and no group imports one after it."""
    graph = _imports()
    ungrouped = sorted(m for m in graph if m.startswith("workloads") and _group(m) not in WORKLOAD_LAYERS)
    assert not ungrouped, f"modules outside config/, planning/, commands/: {ungrouped}"
    wrong = [f"{a} imports {b}" for a, deps in graph.items() if a.startswith("workloads") for b in deps
             if b.startswith("workloads") and WORKLOAD_LAYERS[_group(b)] > WORKLOAD_LAYERS[_group(a)]]
    assert not wrong, wrong


def test_no_module_imports_its_caller():
    graph = _imports()
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        for dep in graph[node]:
            if dep in path:
                cycles.append(" -> ".join(path[path.index(dep):] + [dep]))
            elif len(path) < 12:
                visit(dep, path + [dep])

    for start in graph:
        visit(start, [start])
    assert not cycles, sorted(set(cycles))[:5]


# Training planning by concept, each importing only those before it: capacity (how a type is sold, what to buy), the
# model's layout and speed on a candidate's nodes, the candidates and their ranking, the chosen run's estimate, its
# length and checkpoints; training.py joins them (plan_training).
TRAINING_ORDER = ("capacity", "training_layout", "candidates", "training_estimate", "run_length", "training")
MAX_MODULE_LINES = 500  # planning and commands are split by concept before a module grows past it


def test_training_planning_is_split_by_concept_one_way():
    graph = _imports()
    names = [f"workloads.planning.{m}" for m in TRAINING_ORDER]
    assert not [n for n in names if n not in graph], "a concept's module is missing"
    wrong = [f"{a} imports {b}" for i, a in enumerate(names) for b in graph[a] if b in names[i + 1:]]
    assert not wrong, wrong


def test_no_planning_or_commands_module_is_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for group in ("planning", "commands")
            for p in sorted((ROOT / "workloads" / group).glob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split by concept: {long}"
