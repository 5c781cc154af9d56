"""generation's modules import one another one way only: no cycle, no import hidden inside a function to dodge
one, the tasks on top (nothing in generation imports them), running below dispatch, and analysis reading
generation through generation.selectors alone."""

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """(module-level imports, imports inside functions) of generation/analysis modules, as module names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top, nested = set(), set()

    def names(node):
        if isinstance(node, ast.ImportFrom) and node.module:
            found = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found = {alias.name for alias in node.names}
        else:
            return set()
        return {n for n in found if n.startswith(("generation", "analysis"))}

    for node in tree.body:
        top |= names(node)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                nested |= names(inner)
    return top, nested


def _graph(app: str):
    files = [p for p in (ROOT / app).rglob("*.py") if "migrations" not in p.parts]
    modules = {_module_name(p): p for p in files}
    graph: dict[str, set[str]] = {}
    nested = {}
    for name, path in modules.items():
        graph.setdefault(name, set())
        top, inner = _imports(path)
        nested[name] = {m for m in inner if m in modules or m.rsplit(".", 1)[0] in modules}
        for target in top:
            target = target if target in modules else target.rsplit(".", 1)[0]
            if target in modules and target != name:
                graph[name].add(target)
    return graph, nested


GRAPH, NESTED = _graph("generation")


def _reaches(start: str, goal: str) -> bool:
    seen, todo = set(), [start]
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(GRAPH.get(node, ()))
    return False


def test_generation_has_no_import_cycle():
    graphlib.TopologicalSorter(GRAPH).prepare()  # raises CycleError naming the cycle


def test_no_generation_module_imports_another_inside_a_function():
    assert {name: sorted(found) for name, found in NESTED.items() if found} == {}


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("generation.services.running", "generation.services.dispatch"),
        ("generation.services.running", "generation.tasks"),
        ("generation.services.prompts", "generation.services.running"),
        ("generation.selectors", "generation.services.prompts"),
        ("generation.providers.call", "generation.models"),
    ],
)
def test_the_layers_lean_one_way(module, forbidden):
    assert module in GRAPH and not _reaches(module, forbidden)


def test_nothing_in_generation_imports_the_tasks():
    assert [m for m, targets in GRAPH.items() if "generation.tasks" in targets] == []


def test_analysis_reads_generation_through_its_selectors_only():
    used = set()
    for path in (ROOT / "analysis").rglob("*.py"):
        top, nested = _imports(path)
        used |= {m for m in top | nested if m.startswith("generation")}
    assert used, "analysis reads provenance and judge ratings through generation.selectors"
    outside = {m for m in used if m != "generation.selectors" and not m.startswith("generation.selectors.")}
    assert not outside, f"analysis imports generation outside its selectors: {sorted(outside)}"
