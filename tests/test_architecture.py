"""The architecture as a test (docs/architecture.md draws it).

Builds the import graph of the apps by parsing every module with `ast`: imports at module level and inside
functions, `import x.y`, `from x import y`, relative imports; migrations and tests are left out. A `from x
import y` points at module `x.y` when there is one, else at `x`; an import points at the module it names, not
at the packages above it. Imports made by name at run time (`include("...")`, `import_module("...")`,
INSTALLED_APPS) are wiring, not arrows, and are not seen.

It fails on
(a) an import cycle between modules (a strongly connected component of the module graph, reported as one
    concrete cycle with the line of each import);
(b) an arrow the architecture forbids (FORBIDDEN, less the DECLARED_EXCEPTIONS, each with its reason);
(c) an app module over MAX_MODULE_LINES lines;
(d) a branch on a study's kind outside the kinds' packages (KIND_BRANCH_PATTERNS says what counts: code and
    templates), and an import of one kind's module by a module that does not belong to that kind (KIND_MODULES);
(e) one kind's package importing another's (kinds/<kind>/: `kind_packages_crossing`); the spine, the participant
    front or any other app importing a kind's package is a forbidden arrow of (b);
(f) a string in a kind's package naming a module outside it (`kind_dotted_strings`: an import the graph misses);
(g) the participant front (FRONT, FRONT_TEMPLATES) naming a kind's own step (`front_kind_steps`).

KNOWN_VIOLATIONS lists the violations the code had when this test was written, so it passes while they are
being fixed; every entry must still be a violation (test_every_known_violation_still_exists), so the list can
only shrink. It is meant to be empty.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

ROOT = Path(__file__).resolve().parents[1]

PRODUCTION_APPS = ("studies", "kinds", "ratings", "generation", "analysis", "recruiting", "config")
BENCH_APP = "bench.targets"  # installed only while BENCH_FLOOR_ENABLED=1 (config/settings.py)
APPS = (*PRODUCTION_APPS, BENCH_APP)
MAX_MODULE_LINES = 500

# What each app must not import: a name is forbidden when it is one of these or inside one. `bench` covers
# the bench app and the benchmark scripts, `tests` the suite. config wires the apps (by name in settings and
# URLs) and may import any production app; the bench app may import anything.
FORBIDDEN = {
    "studies": ("kinds", "ratings", "generation", "analysis", "recruiting", "bench", "tests"),
    "kinds": ("ratings", "recruiting", "bench", "tests"),
    "ratings": ("kinds", "generation", "analysis", "recruiting", "bench", "tests"),
    "generation": ("kinds", "ratings", "analysis", "recruiting", "bench", "tests"),
    "analysis": ("kinds", "ratings", "generation", "recruiting", "bench", "tests"),
    "recruiting": ("kinds", "ratings", "generation", "analysis", "bench", "tests"),
    "config": ("bench", "tests"),
}

# The declared exceptions to FORBIDDEN, (importing app, imported module or package) -> why. Keep it short:
# each one is also drawn in docs/architecture.md, and each must be in use (an unused one is a violation).
DECLARED_EXCEPTIONS = {
    ("analysis", "generation.selectors"): (
        "the responses export carries each response's provenance (model, settings, tokens, cost), which "
        "generation owns; analysis reads it through generation's read-only selectors, never its services"
    ),
}

# Today's violations, key -> what fixes it. Emptied when the fixes land.
KNOWN_VIOLATIONS: dict[str, str] = {}

# --- study kinds (docs/architecture.md, "A new study kind") --------------------------------------------------
# Generic code asks a study's kind what it offers (`kind_of(study).judged`, `.analysis_page`, ...); only the
# kinds' own package compares kinds. What counts as a branch on the kind, anywhere else (code and templates):
KIND_BRANCH_PATTERNS = """\
a comparison (==, !=, is, in) with a kind value, or of a study's `.kind` (`study.kind`, `x.study.kind`);
a dictionary keyed by kind values (every key one); isinstance/issubclass with a StudyKind subclass; a `match` case on a kind
value; a query filter (filter, exclude, get, Q) on `kind`/`…__kind` with a kind value; a template tag
`{% if/elif %}` comparing `kind` with a kind's name. A kind value: `Study.Kind.*`, a kind's name as a string,
a registered kind object (`QUESTIONNAIRE`) or its `.name`, `kind_of(...)`/`kind_named(...)` in a comparison."""
KINDS_PACKAGE = "kinds"
TEMPLATE_DIRS = ("templates",)
# Modules that belong to one kind, -> the kind's module they may import (its objects, its own helpers). Every
# other module reaches a kind through `studies.kinds` (kind_of and the StudyKind interface). Each entry must be
# in use (an unused one is a violation).
KIND_MODULES: dict[str, str] = {}


# --- the graph ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # a module of the apps, or a dotted name under `outside` (bench scripts, tests)
    line: int
    type_only: bool = False  # under `if TYPE_CHECKING:`: never executed, so it closes no runtime cycle


@dataclass(frozen=True)
class Graph:
    modules: dict[str, Path]
    imports: tuple[Import, ...]

    def edges(self, *, runtime_only: bool = False) -> set[tuple[str, str]]:
        return {(i.importer, i.imported) for i in self.imports if not (runtime_only and i.type_only)}


@dataclass(frozen=True)
class Violation:
    key: str  # stable: what KNOWN_VIOLATIONS names
    detail: str  # for the failure message (lines, paths)


def _is_left_out(relative: Path) -> bool:
    return any(part in {"migrations", "tests", "__pycache__"} for part in relative.parts[:-1]) or (
        relative.name == "tests.py" or relative.name.startswith("test_")
    )


def modules_find(root: Path, apps: tuple[str, ...]) -> dict[str, Path]:
    """Every module of the apps (dotted name -> file), migrations and tests left out."""
    modules = {}
    for app in apps:
        for path in sorted((root / app.replace(".", "/")).rglob("*.py")):
            relative = path.relative_to(root)
            if _is_left_out(relative):
                continue
            parts = list(relative.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: dict[str, Path], outside: tuple[str, ...]) -> str | None:
    """The module of the apps a dotted name lives in (its longest prefix that is one), the name itself when it
    is under `outside`, else None (the standard library, third-party packages)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix
    return name if parts[0] in outside else None


def imports_find(module: str, path: Path, modules: dict[str, Path], outside: tuple[str, ...]) -> list[Import]:
    """Every import in one module that points into the apps or `outside`, wherever it stands in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    type_only = {
        id(inner)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and ast.unparse(block.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}
        for statement in block.body
        for inner in ast.walk(statement)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [_resolve(alias.name, modules, outside) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [
                f"{base}.{alias.name}"
                if f"{base}.{alias.name}" in modules
                else _resolve(base, modules, outside)
                for alias in node.names
            ]
        else:
            continue
        found += [
            Import(module, target, node.lineno, type_only=id(node) in type_only)
            for target in targets
            if target and target != module
        ]
    return found


def graph_build(root: Path, apps: tuple[str, ...], outside: tuple[str, ...] = ("bench", "tests")) -> Graph:
    modules = modules_find(root, apps)
    first: dict[tuple[str, str], Import] = {}
    for module, path in modules.items():
        for found in imports_find(module, path, modules, outside):
            known = first.get((found.importer, found.imported))
            if known is None or (known.type_only and not found.type_only):
                first[found.importer, found.imported] = found
    return Graph(
        modules=modules, imports=tuple(sorted(first.values(), key=lambda i: (i.importer, i.imported)))
    )


def _owner(name: str, prefixes) -> str | None:
    """The longest prefix (an app, a package) that `name` is or is inside."""
    matches = [p for p in prefixes if name == p or name.startswith(p + ".")]
    return max(matches, key=len) if matches else None


# --- the rules ---------------------------------------------------------------------------------------------
def cycles_find(graph: Graph) -> list[Violation]:
    """Each strongly connected component of more than one module, shown as one shortest cycle through it."""
    names = sorted(graph.modules)
    index = {name: i for i, name in enumerate(names)}
    runtime = graph.edges(runtime_only=True)
    pairs = [(index[a], index[b]) for a, b in runtime if b in index]
    if not pairs:
        return []
    rows, cols = zip(*pairs, strict=True)
    matrix = coo_matrix((np.ones(len(pairs)), (rows, cols)), shape=(len(names), len(names)))
    _, labels = connected_components(matrix, directed=True, connection="strong")
    lines = {(i.importer, i.imported): i.line for i in graph.imports}
    violations = []
    for label in sorted(set(labels)):
        members = sorted(names[i] for i in np.flatnonzero(labels == label))
        if len(members) < 2:
            continue
        cycle = _shortest_cycle(members[0], set(members), runtime)
        shown = " -> ".join(
            f"{a} (line {lines[a, b]})" for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True)
        )
        violations.append(Violation(f"cycle among {', '.join(members)}", f"{shown} -> {cycle[0]}"))
    return violations


def _shortest_cycle(start: str, members: set[str], edges: set[tuple[str, str]]) -> list[str]:
    following: dict[str, list[str]] = {}
    for a, b in sorted(edges):
        if a in members and b in members:
            following.setdefault(a, []).append(b)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for after in following.get(node, []):
            if after == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if after not in came_from:
                came_from[after] = node
                queue.append(after)
    raise AssertionError(f"{start} is in a strongly connected component but on no cycle")


def arrows_forbidden(graph: Graph, forbidden: dict, exceptions: dict) -> list[Violation]:
    """Imports FORBIDDEN names (less the declared exceptions), then the declared exceptions nothing uses."""
    violations, used = [], set()
    for found in graph.imports:
        app = _owner(found.importer, forbidden)
        if app is None or _owner(found.imported, forbidden[app]) is None:
            continue
        excused = [(a, m) for a, m in exceptions if a == app and _owner(found.imported, [m])]
        if excused:
            used.update(excused)
            continue
        violations.append(
            Violation(
                f"arrow {found.importer} -> {found.imported}",
                f"{graph.modules[found.importer]}:{found.line} imports {found.imported}",
            )
        )
    violations += [
        Violation(f"unused exception {app} -> {module}", "declared but imported nowhere")
        for app, module in exceptions
        if (app, module) not in used
    ]
    return violations


def modules_too_long(graph: Graph, limit: int) -> list[Violation]:
    violations = []
    for module, path in sorted(graph.modules.items()):
        lines = len(path.read_text().splitlines())
        if lines > limit:
            violations.append(Violation(f"long {module}", f"{path}: {lines} lines"))
    return violations


@dataclass(frozen=True)
class Kinds:
    """What names a kind in code, read from the kinds' package: the registered kinds' names, their objects
    (`RATING = register(RatingKind())`), their StudyKind subclasses, and the modules that define them."""

    names: frozenset[str]
    objects: frozenset[str]
    classes: frozenset[str]
    modules: frozenset[str]


def kinds_read(graph: Graph, package: str) -> Kinds:
    names, objects, classes, modules = set(), set(), set(), set()
    for module, path in graph.modules.items():
        if _owner(module, [package]) is None:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                ast.unparse(b).endswith("StudyKind") for b in node.bases
            ):
                classes.add(node.name)
                modules.add(module)
                names.update(
                    item.value.value
                    for item in node.body
                    if isinstance(item, ast.Assign)
                    and [ast.unparse(t) for t in item.targets] == ["name"]
                    and isinstance(item.value, ast.Constant)
                )
            elif (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Call)
                and ast.unparse(node.value.func) == "register"
            ):
                objects.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return Kinds(frozenset(names), frozenset(objects), frozenset(classes), frozenset(modules))


def _is_kind_value(node: ast.AST, kinds: Kinds, *, in_comparison: bool = False) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_is_kind_value(e, kinds, in_comparison=in_comparison) for e in node.elts)
    text = ast.unparse(node)
    if text == "Study.Kind" or text.startswith("Study.Kind."):
        return True
    if isinstance(node, ast.Constant) and node.value in kinds.names:
        return True
    if isinstance(node, ast.Name) and node.id in kinds.objects | kinds.classes:
        return True
    if isinstance(node, ast.Attribute) and node.attr == "name" and ast.unparse(node.value) in kinds.objects:
        return True
    return (
        in_comparison
        and isinstance(node, ast.Call)
        and ast.unparse(node.func).split(".")[-1] in ("kind_of", "kind_named")
    )


def _is_study_kind(node: ast.AST) -> bool:
    """`study.kind`, `self.study.kind`, `original.kind`: the kind of a study (a condition's or a page's kind is
    another field)."""
    if not (isinstance(node, ast.Attribute) and node.attr == "kind"):
        return False
    owner = node.value
    name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
    return "study" in name.lower() or name == "original"


FILTERS = ("filter", "exclude", "get", "Q")


def _kind_branches_in_code(tree: ast.AST, kinds: Kinds) -> list[ast.AST]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_is_kind_value(o, kinds, in_comparison=True) or _is_study_kind(o) for o in operands):
                found.append(node)
        elif isinstance(node, ast.Dict):
            # Keyed by kind: every key a kind value (a record with a "rating" field is not).
            if node.keys and all(key is not None and _is_kind_value(key, kinds) for key in node.keys):
                found.append(node)
        elif isinstance(node, ast.DictComp) and _is_kind_value(node.key, kinds):
            found.append(node)
        elif isinstance(node, ast.match_case) and any(
            isinstance(p, ast.MatchValue) and _is_kind_value(p.value, kinds) for p in ast.walk(node.pattern)
        ):
            found.append(node.pattern)
        elif isinstance(node, ast.Call):
            called = ast.unparse(node.func).split(".")[-1]
            if called in ("isinstance", "issubclass") and len(node.args) == 2:
                if _is_kind_value(node.args[1], kinds):
                    found.append(node)
            elif called in FILTERS and any(
                keyword.arg
                and (keyword.arg.split("__")[-1] == "kind" or keyword.arg.split("__")[-2:] == ["kind", "in"])
                and _is_kind_value(keyword.value, kinds)
                for keyword in node.keywords
            ):
                found.append(node)
    return found


TEMPLATE_TAG = re.compile(r"\{%\s*(?:if|elif)\b[^%]*\bkind\b[^%]*%\}")


def kind_branches_find(
    graph: Graph, package: str, root: Path, template_dirs: tuple[str, ...] = ()
) -> list[Violation]:
    """Every branch on a study's kind (KIND_BRANCH_PATTERNS) outside the kinds' package."""
    kinds = kinds_read(graph, package)
    violations = []
    for module, path in sorted(graph.modules.items()):
        if _owner(module, [package]) is not None:
            continue
        for node in _kind_branches_in_code(ast.parse(path.read_text(), filename=str(path)), kinds):
            violations.append(
                Violation(f"kind branch in {module}: {ast.unparse(node)}", f"{path}:{node.lineno}")
            )
    for directory in template_dirs:
        for path in sorted((root / directory).rglob("*.html")):
            text = path.read_text()
            for match in TEMPLATE_TAG.finditer(text):
                tag = match.group(0)
                if any(re.search(rf"([\"']){re.escape(name)}\1", tag) for name in kinds.names):
                    line = text.count("\n", 0, match.start()) + 1
                    violations.append(
                        Violation(f"kind branch in {path.relative_to(root)}: {tag}", f"{path}:{line}")
                    )
    return violations


def kind_modules_imported(graph: Graph, package: str, owned: dict[str, str]) -> list[Violation]:
    """Imports of one kind's module from outside the kinds' package by a module that does not belong to that
    kind (`owned`: module -> the kind's module), then the `owned` entries nothing uses."""
    kind_modules = kinds_read(graph, package).modules
    violations, used = [], set()
    for found in graph.imports:
        if found.imported not in kind_modules or _owner(found.importer, [package]) is not None:
            continue
        if owned.get(found.importer) == found.imported:
            used.add(found.importer)
            continue
        violations.append(
            Violation(
                f"kind module {found.imported} imported by {found.importer}",
                f"{graph.modules[found.importer]}:{found.line}: ask the kind through {package} instead, or "
                "declare the module as the kind's own in KIND_MODULES",
            )
        )
    violations += [
        Violation(f"unused kind module entry {module}", "declared in KIND_MODULES but imports no kind module")
        for module in owned
        if module not in used
    ]
    return violations


# --- the kinds' packages (docs/architecture.md, "A new study kind") -------------------------------------------
# A kind is one package under KINDS_PACKAGE; the spine and the participant front below/above it never import one
# (FORBIDDEN), one kind never imports another, a kind names no module outside its package by a dotted string, and
# the participant front (FRONT) names no kind's step, in code or in its templates (FRONT_TEMPLATES).
FRONT = "ratings"
SPINE = "studies"
FRONT_TEMPLATES = ("templates/ratings",)
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _kind_package(module: str, package: str) -> str | None:
    """`kinds.pairwise` for `kinds.pairwise.pages`; None outside the kinds' packages."""
    parts = module.split(".")
    prefix = package.split(".")
    if parts[: len(prefix)] != prefix or len(parts) <= len(prefix):
        return None
    return ".".join(parts[: len(prefix) + 1])


def kind_packages_crossing(graph: Graph, package: str) -> list[Violation]:
    """Every import of one kind's package by another kind's."""
    violations = []
    for found in graph.imports:
        mine, theirs = _kind_package(found.importer, package), _kind_package(found.imported, package)
        if mine and theirs and mine != theirs:
            violations.append(
                Violation(
                    f"kind {mine} imports kind {theirs}",
                    f"{graph.modules[found.importer]}:{found.line} imports {found.imported}",
                )
            )
    return violations


def _strings(tree: ast.AST):
    """The string constants of a module that are not docstrings."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def _dotted_strings_out(graph: Graph, home_of) -> list[Violation]:
    """Every string in a module with a home (`home_of(module)`: a package, or None to skip the module) that names
    a module of the apps (or something in one) outside that home: a dotted path resolved at run time is an
    import the graph does not see."""
    violations = []
    for module, path in sorted(graph.modules.items()):
        mine = home_of(module)
        if mine is None:
            continue
        for node in _strings(ast.parse(path.read_text(), filename=str(path))):
            if not DOTTED.fullmatch(node.value):
                continue
            named = _resolve(node.value, graph.modules, ())
            if named is not None and _owner(named, [mine]) is None:
                violations.append(
                    Violation(f"dotted string {node.value!r} in {module}", f"{path}:{node.lineno}: import it")
                )
    return violations


def kind_dotted_strings(graph: Graph, package: str) -> list[Violation]:
    """Every string in a kind's package naming a module outside that package."""
    return _dotted_strings_out(graph, lambda module: _kind_package(module, package))


def spine_dotted_strings(graph: Graph, spine: str) -> list[Violation]:
    """Every string in the spine naming a module outside it: the spine may not reach the apps above it by a
    dotted path any more than by an import (they register what it needs from their `ready()`)."""
    return _dotted_strings_out(graph, lambda module: spine if _owner(module, [spine]) else None)


def front_kind_steps(
    graph: Graph, front: str, steps: dict[str, str], root: Path, template_dirs: tuple[str, ...] = ()
) -> list[Violation]:
    """Every place the participant front names a kind's step (`steps`: the step choice's member name -> its
    value): the value as a string, the choice's member (`Participant.Step.ITEMS`), a template tag quoting it."""
    violations = []
    for module, path in sorted(graph.modules.items()):
        if _owner(module, [front]) is None:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            named = (
                isinstance(node, ast.Constant)
                and node.value in steps.values()
                or isinstance(node, ast.Attribute)
                and node.attr in steps
                and ast.unparse(node.value).split(".")[-1] == "Step"
            )
            if named:
                violations.append(
                    Violation(f"kind step in {module}: {ast.unparse(node)}", f"{path}:{node.lineno}")
                )
    quoted = re.compile(r"([\"'])(" + "|".join(map(re.escape, sorted(steps.values()))) + r")\1")
    for directory in template_dirs:
        for path in sorted((root / directory).rglob("*.html")):
            text = path.read_text()
            for tag in re.finditer(r"\{%.*?%\}", text, re.S):
                if quoted.search(tag.group(0)):
                    line = text.count("\n", 0, tag.start()) + 1
                    violations.append(
                        Violation(f"kind step in {path.relative_to(root)}: {tag.group(0)}", f"{path}:{line}")
                    )
    return violations


def kinds_steps() -> dict[str, str]:
    """The registered kinds' own steps (not the spine's: consent, instructions, done), member name -> value."""
    from studies.kinds import DONE, registered_kinds
    from studies.kinds.base import SPINE_STEPS
    from studies.models import Participant

    own = {step for kind in registered_kinds() for step in kind.step_labels} - set(SPINE_STEPS) - {DONE}
    members = {member.name: member.value for member in Participant.Step if member.value in own}
    return {**members, **{value.upper(): value for value in own - set(members.values())}}


def unexpected(violations: list[Violation], known: dict[str, str]) -> list[str]:
    return [f"{v.key}: {v.detail}" for v in violations if v.key not in known]


# --- the apps ----------------------------------------------------------------------------------------------
_GRAPH = graph_build(ROOT, APPS)


def test_the_graph_sees_every_app_and_their_imports():
    apps_seen = {_owner(module, APPS) for module in _GRAPH.modules}
    assert apps_seen == set(APPS)
    edges = _GRAPH.edges()
    assert ("config.urls", "config.health") in edges
    assert ("bench.targets.views", "bench.targets.models") in edges  # a relative import
    assert any(_owner(a, ["ratings"]) and _owner(b, ["studies"]) for a, b in edges)


def test_no_import_cycle_between_modules():
    found = unexpected(cycles_find(_GRAPH), KNOWN_VIOLATIONS)
    assert not found, "import cycles:\n" + "\n".join(found)


def test_no_app_imports_what_the_architecture_forbids():
    found = unexpected(arrows_forbidden(_GRAPH, FORBIDDEN, DECLARED_EXCEPTIONS), KNOWN_VIOLATIONS)
    assert not found, "forbidden arrows:\n" + "\n".join(found)


def test_no_app_module_is_over_the_line_limit():
    found = unexpected(modules_too_long(_GRAPH, MAX_MODULE_LINES), KNOWN_VIOLATIONS)
    assert not found, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(found)


def test_no_branch_on_a_study_kind_outside_the_kinds_package():
    found = unexpected(kind_branches_find(_GRAPH, KINDS_PACKAGE, ROOT, TEMPLATE_DIRS), KNOWN_VIOLATIONS)
    assert not found, "branches on the study kind (ask the kind instead):\n" + "\n".join(found)


def test_a_kind_module_is_imported_only_by_the_modules_of_its_kind():
    found = unexpected(kind_modules_imported(_GRAPH, KINDS_PACKAGE, KIND_MODULES), KNOWN_VIOLATIONS)
    assert not found, "kind modules imported from outside their kind:\n" + "\n".join(found)


def test_the_kinds_are_read_from_their_package():
    kinds = kinds_read(_GRAPH, KINDS_PACKAGE)
    assert {"rating", "questionnaire"} <= kinds.names
    assert {"RATING", "QUESTIONNAIRE"} <= kinds.objects
    assert {"RatingKind", "QuestionnaireKind"} <= kinds.classes
    assert {"kinds.rating.kind", "kinds.questionnaire.kind", "kinds.pairwise.kind"} <= kinds.modules


def test_no_kind_package_imports_another():
    found = unexpected(kind_packages_crossing(_GRAPH, KINDS_PACKAGE), KNOWN_VIOLATIONS)
    assert not found, "a kind imports another kind (ask the registry instead):\n" + "\n".join(found)


def test_a_kind_names_no_module_outside_its_package_by_a_dotted_string():
    found = unexpected(kind_dotted_strings(_GRAPH, KINDS_PACKAGE), KNOWN_VIOLATIONS)
    assert not found, "dotted strings out of a kind's package:\n" + "\n".join(found)


def test_the_spine_names_no_module_above_it_by_a_dotted_string():
    found = unexpected(spine_dotted_strings(_GRAPH, SPINE), KNOWN_VIOLATIONS)
    assert not found, "dotted strings out of the spine (register them from their app):\n" + "\n".join(found)


def test_the_participant_front_names_no_kinds_step():
    steps = kinds_steps()
    assert {"items", "teq", "pairs", "q_default", "q_evoked"} <= set(steps.values())
    found = unexpected(front_kind_steps(_GRAPH, FRONT, steps, ROOT, FRONT_TEMPLATES), KNOWN_VIOLATIONS)
    assert not found, "the participant front names a kind's step (ask the step's page):\n" + "\n".join(found)


def test_every_known_violation_still_exists():
    current = {
        v.key
        for v in cycles_find(_GRAPH)
        + arrows_forbidden(_GRAPH, FORBIDDEN, DECLARED_EXCEPTIONS)
        + modules_too_long(_GRAPH, MAX_MODULE_LINES)
        + kind_branches_find(_GRAPH, KINDS_PACKAGE, ROOT, TEMPLATE_DIRS)
        + kind_modules_imported(_GRAPH, KINDS_PACKAGE, KIND_MODULES)
        + kind_packages_crossing(_GRAPH, KINDS_PACKAGE)
        + kind_dotted_strings(_GRAPH, KINDS_PACKAGE)
        + spine_dotted_strings(_GRAPH, SPINE)
        + front_kind_steps(_GRAPH, FRONT, kinds_steps(), ROOT, FRONT_TEMPLATES)
    }
    fixed = sorted(set(KNOWN_VIOLATIONS) - current)
    assert not fixed, "fixed (or renamed): remove from KNOWN_VIOLATIONS:\n" + "\n".join(fixed)


# --- the rules on a small package that breaks each of them -------------------------------------------------
def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


SYNTHETIC = {
    "low/__init__.py": "",
    "low/models.py": "import os\nfrom django.db import models\n",
    "low/store.py": "from low import models\nfrom . import models as again\n",
    "high/__init__.py": "",
    "high/a.py": """\
        from low.models import Thing


        def later():
            from . import b  # inside a function: still an arrow
            return b
        """,
    "high/b.py": "import high.a\n",
    "high/sub/__init__.py": "from .d import helper\n",
    "high/sub/d.py": "from ..a import later\nfrom . import e\n\n\ndef helper():\n    import bench.lib.stack\n",
    "high/sub/e.py": "x = 1\n",
    "high/migrations/0001_initial.py": "import side.c\n",
    "high/tests/test_a.py": "import side.c\n",
    "side/__init__.py": "",
    "side/c.py": "from high.a import later\nfrom high.sub import helper\n" + "\n" * 12,
}
SYNTHETIC_FORBIDDEN = {"low": ("high", "side", "bench"), "high": ("side", "bench"), "side": ("high", "bench")}


def test_the_graph_follows_module_function_relative_and_from_imports(tmp_path):
    _write(tmp_path, SYNTHETIC)
    graph = graph_build(tmp_path, ("low", "high", "side"))
    assert "high.migrations.0001_initial" not in graph.modules and "high.tests.test_a" not in graph.modules
    assert graph.edges() == {
        ("low.store", "low.models"),  # `from low import models` names the module, not the package
        ("high.a", "low.models"),
        ("high.a", "high.b"),  # inside a function
        ("high.b", "high.a"),
        ("high.sub", "high.sub.d"),
        ("high.sub.d", "high.a"),  # two levels up
        ("high.sub.d", "high.sub.e"),
        ("high.sub.d", "bench.lib.stack"),  # outside the apps, kept for the rules
        ("side.c", "high.a"),
        ("side.c", "high.sub"),
    }


def test_a_cycle_is_found_and_shown_with_its_lines(tmp_path):
    _write(tmp_path, SYNTHETIC)
    [cycle] = cycles_find(graph_build(tmp_path, ("low", "high", "side")))
    assert cycle.key == "cycle among high.a, high.b"
    assert cycle.detail == "high.a (line 5) -> high.b (line 1) -> high.a"


def test_an_import_only_for_type_checking_closes_no_cycle(tmp_path):
    files = {
        "p/__init__.py": "",
        "p/x.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from p.y import Y\n",
        "p/y.py": "from p import x\n",
    }
    _write(tmp_path, files)
    assert cycles_find(graph_build(tmp_path, ("p",))) == []
    # The same import executed (inside a function) is a cycle.
    _write(tmp_path, {**files, "p/x.py": files["p/x.py"] + "\n\ndef f():\n    from p.y import Y\n"})
    [cycle] = cycles_find(graph_build(tmp_path, ("p",)))
    assert cycle.key == "cycle among p.x, p.y"


def test_a_three_module_cycle_is_one_violation(tmp_path):
    _write(
        tmp_path,
        {
            "p/__init__.py": "",
            "p/x.py": "from p import y\n",
            "p/y.py": "import p.z\n",
            "p/z.py": "from .x import f\n",
        },
    )
    [cycle] = cycles_find(graph_build(tmp_path, ("p",)))
    assert cycle.key == "cycle among p.x, p.y, p.z"
    assert cycle.detail == "p.x (line 1) -> p.y (line 1) -> p.z (line 1) -> p.x"


def test_forbidden_arrows_are_found_and_declared_exceptions_excuse_them(tmp_path):
    _write(tmp_path, SYNTHETIC)
    graph = graph_build(tmp_path, ("low", "high", "side"))
    keys = [v.key for v in arrows_forbidden(graph, SYNTHETIC_FORBIDDEN, {})]
    assert keys == [
        "arrow high.sub.d -> bench.lib.stack",
        "arrow side.c -> high.a",
        "arrow side.c -> high.sub",
    ]
    excused = arrows_forbidden(
        graph, SYNTHETIC_FORBIDDEN, {("side", "high.sub"): "why", ("low", "side"): "why"}
    )
    assert [v.key for v in excused] == [
        "arrow high.sub.d -> bench.lib.stack",
        "arrow side.c -> high.a",
        "unused exception low -> side",
    ]


def test_a_long_module_is_found(tmp_path):
    _write(tmp_path, SYNTHETIC)
    [long] = modules_too_long(graph_build(tmp_path, ("low", "high", "side")), limit=10)
    assert long.key == "long side.c"
    assert long.detail.endswith("14 lines")


def test_known_violations_hide_only_themselves():
    violations = [Violation("long a", "600 lines"), Violation("long b", "700 lines")]
    assert unexpected(violations, {"long a": "being split"}) == ["long b: 700 lines"]


# --- the kind rules on a small package with a third kind -----------------------------------------------------
KIND_SYNTHETIC = {
    "spine/__init__.py": "",
    "spine/kinds/__init__.py": "",
    "spine/kinds/base.py": "class StudyKind:\n    name = ''\n",
    "spine/kinds/pair.py": """\
        from .base import StudyKind


        class PairKind(StudyKind):
            name = "pairwise"


        PAIR = register(PairKind())
        if study.kind == "pairwise":  # the kinds' own package may compare
            pass
        """,
    "spine/clean.py": """\
        from spine.kinds import kind_of

        if kind_of(study).judged and condition.kind == Condition.Kind.LLM and page.kind != "attention":
            Study.objects.create(kind=PAIR.name)  # naming a kind to create a study is no branch
            Study.objects.filter(kind__in=kinds_with(lambda kind: kind.judged))
        """,
    "spine/branchy.py": """\
        from spine.kinds.pair import PAIR, PairKind

        if study.kind == "pairwise":
            pass
        if self.study.kind != Study.Kind.RATING:
            pass
        if kind_of(study) is PAIR:
            pass
        if kind in (PAIR.name, "other"):
            pass
        PAGES = {"pairwise": 1}
        ROW = {"pairwise": 1, "id": 2}  # a record with a field of that name is not keyed by kind
        if isinstance(kind, PairKind):
            pass
        Study.objects.filter(kind=PAIR.name)
        Q(study__kind__in=["pairwise"])
        match name:
            case "pairwise":
                pass
        """,
    "spine/owned.py": "from spine.kinds import pair\n",
    "pages/yes.html": '{% if original.kind == "pairwise" %}x{% endif %}{% if c.kind == "llm" %}y{% endif %}\n',
}


def test_each_kind_branch_is_found_and_the_kinds_own_package_and_creation_are_not(tmp_path):
    _write(tmp_path, KIND_SYNTHETIC)
    graph = graph_build(tmp_path, ("spine",))
    kinds = kinds_read(graph, "spine.kinds")
    assert (kinds.names, kinds.objects, kinds.classes) == ({"pairwise"}, {"PAIR"}, {"PairKind"})
    keys = [v.key for v in kind_branches_find(graph, "spine.kinds", tmp_path, ("pages",))]
    assert keys == [
        "kind branch in spine.branchy: study.kind == 'pairwise'",
        "kind branch in spine.branchy: self.study.kind != Study.Kind.RATING",
        "kind branch in spine.branchy: kind_of(study) is PAIR",
        "kind branch in spine.branchy: kind in (PAIR.name, 'other')",
        "kind branch in spine.branchy: {'pairwise': 1}",
        "kind branch in spine.branchy: isinstance(kind, PairKind)",
        "kind branch in spine.branchy: Study.objects.filter(kind=PAIR.name)",
        "kind branch in spine.branchy: Q(study__kind__in=['pairwise'])",
        "kind branch in spine.branchy: 'pairwise'",
        'kind branch in pages/yes.html: {% if original.kind == "pairwise" %}',
    ]


def test_a_kind_module_imported_outside_its_kind_is_found_and_an_owner_is_excused(tmp_path):
    _write(tmp_path, KIND_SYNTHETIC)
    graph = graph_build(tmp_path, ("spine",))
    keys = [v.key for v in kind_modules_imported(graph, "spine.kinds", {})]
    assert keys == [
        "kind module spine.kinds.pair imported by spine.branchy",
        "kind module spine.kinds.pair imported by spine.owned",
    ]
    owned = {"spine.owned": "spine.kinds.pair", "spine.clean": "spine.kinds.pair"}
    assert [v.key for v in kind_modules_imported(graph, "spine.kinds", owned)] == [
        "kind module spine.kinds.pair imported by spine.branchy",
        "unused kind module entry spine.clean",
    ]


# --- the kinds' package rules on a small tree that breaks each of them -----------------------------------------
PACKAGES_SYNTHETIC = {
    "spine/__init__.py": "",
    "spine/models.py": "thing = 1\n",
    "spine/uses.py": "from kinds_pkg.a import kind  # the spine importing a kind\n",
    "spine/registry.py": 'PAGES = {"consent": "front.views.PAGE", "own": "spine.models.thing"}\n',
    "front/__init__.py": "",
    "front/views.py": """\
        from kinds_pkg.a import pages  # the front importing a kind

        PAGE = None
        if participant.step == Participant.Step.ANSWER_A or participant.step == "answer_a":
            pass
        if participant.step == Participant.Step.CONSENT or participant.step == "answers":  # not a kind's step
            pass
        """,
    "kinds_pkg/__init__.py": "",
    "kinds_pkg/a/__init__.py": "",
    "kinds_pkg/a/kind.py": """\
        \"\"\"Named in a docstring: front.views.PAGE is no string to resolve.\"\"\"

        pages = {"answer_a": "kinds_pkg.a.pages.PAGE", "other": "front.views.PAGE"}
        analysis = "spine.models.thing"
        template = "front/page.html"
        url = "analysis:page"
        """,
    "kinds_pkg/a/pages.py": "from kinds_pkg.b import kind\nfrom spine import models\nfrom . import kind as mine\n",
    "kinds_pkg/b/__init__.py": "",
    "kinds_pkg/b/kind.py": "from spine.models import thing\n",
    "front_pages/page.html": '{% if step == "answer_a" %}a{% endif %}{% if step == "consent" %}c{% endif %}\n',
}
PACKAGES_FORBIDDEN = {"spine": ("kinds_pkg", "front"), "front": ("kinds_pkg",), "kinds_pkg": ("front",)}


def test_the_kind_package_rules_each_find_their_planted_violation(tmp_path):
    _write(tmp_path, PACKAGES_SYNTHETIC)
    graph = graph_build(tmp_path, ("spine", "front", "kinds_pkg"))
    assert [v.key for v in kind_packages_crossing(graph, "kinds_pkg")] == [
        "kind kinds_pkg.a imports kind kinds_pkg.b"
    ]
    assert [v.key for v in arrows_forbidden(graph, PACKAGES_FORBIDDEN, {})] == [
        "arrow front.views -> kinds_pkg.a.pages",
        "arrow spine.uses -> kinds_pkg.a.kind",
    ]
    assert [v.key for v in kind_dotted_strings(graph, "kinds_pkg")] == [
        "dotted string 'front.views.PAGE' in kinds_pkg.a.kind",
        "dotted string 'spine.models.thing' in kinds_pkg.a.kind",
    ]
    assert [v.key for v in spine_dotted_strings(graph, "spine")] == [
        "dotted string 'front.views.PAGE' in spine.registry"
    ]
    steps = {"ANSWER_A": "answer_a"}
    assert [v.key for v in front_kind_steps(graph, "front", steps, tmp_path, ("front_pages",))] == [
        "kind step in front.views: Participant.Step.ANSWER_A",
        "kind step in front.views: 'answer_a'",
        'kind step in front_pages/page.html: {% if step == "answer_a" %}',
    ]
