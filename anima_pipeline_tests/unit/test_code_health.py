"""Code-health rules a newcomer relies on (issue 24): one error hierarchy, the step names as
one type, settings that do not pull in the night's engine."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys

import anima_pipeline
from anima_pipeline.core.errors import AnimaError
from anima_pipeline_tests.conftest import REPO


def package_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages(anima_pipeline.__path__, "anima_pipeline.")
        if not m.name.endswith("__main__")
    )


def test_every_exception_of_the_package_is_an_anima_error() -> None:
    """One hierarchy: the CLI, HTTP and MCP faces can map any of them by its area."""
    strays = []
    seen = 0
    for name in package_modules():
        module = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException):
                seen += 1
                if not issubclass(cls, AnimaError):
                    strays.append(f"{name}.{cls_name}")
    assert seen >= 30 and strays == []


def test_settings_import_neither_the_night_nor_dagster() -> None:
    """config.py sits at the bottom of the layers: building Settings() compiles no heuristics."""
    code = (
        "import sys; from anima_pipeline.config import Settings; Settings(); "
        "print(sorted(m for m in sys.modules if m.startswith(('anima_pipeline.night', "
        "'anima_pipeline.text', 'dagster'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_step_names_are_written_once_in_steps_py() -> None:
    """Every other module names a step by its StepKey member, never by the bare string."""
    import ast

    from anima_pipeline.core.steps import STEP_ORDER

    names = set(STEP_ORDER)
    found = []
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        if path.relative_to(REPO).as_posix() == "anima_pipeline/core/steps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value}")
    assert found == []


# The layers (docs/decisions.md): the chat-time and storage rooms never reach up into the
# night, the Dagster definitions or the faces; core/steps.py and core/errors.py are the floor.
LOWER = ("store", "text", "recall", "embed")
UPPER = ("night", "memory", "defs", "service", "cli")


def absolute(package: str, level: int, module: str | None) -> str:
    """The module a `from` import names, relative imports resolved against `package`."""
    base = package.split(".")[: len(package.split(".")) - level + 1] if level else []
    return ".".join([*base, *([module] if module else [])])


def package_imports() -> list[tuple[str, int, str]]:
    """(file, line, imported module or module.name) of every import in the package, at
    module level or inside a function, relative imports resolved."""
    import ast

    out = []
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        rel = path.relative_to(REPO)
        module = ".".join(rel.with_suffix("").parts)
        package = module.removesuffix(".__init__") if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out += [(str(rel), node.lineno, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                name = absolute(package, node.level, node.module)
                out += [(str(rel), node.lineno, f"{name}.{a.name}") for a in node.names]
    return out


def test_imports_follow_the_layers() -> None:
    wrong = []
    for file, line, name in package_imports():
        parts = name.split(".")
        if parts[0] != "anima_pipeline" or len(parts) < 2:
            continue
        room = file.split("/")[1].removesuffix(".py")
        if room in LOWER and parts[1] in UPPER:
            wrong.append(f"{file}:{line} imports {name}")
        if room == "steps" and parts[1] != "errors" or room == "errors":
            wrong.append(
                f"{file}:{line} imports {name} (core/steps.py and core/errors.py import nothing of the package)"
            )
    assert wrong == []


def test_the_layer_rule_resolves_relative_imports() -> None:
    """`from ..night import registry` in recall/ names anima_pipeline.night: caught like an absolute one."""
    assert absolute("anima_pipeline.recall", 2, "night") == "anima_pipeline.night"
    assert absolute("anima_pipeline.recall", 1, "ranking") == "anima_pipeline.recall.ranking"
    assert absolute("anima_pipeline.recall", 1, None) == "anima_pipeline.recall"
    assert any(name == "anima_pipeline.store.db.one" for _, _, name in package_imports())


# SQL lives in store/ (and recall's ranking queries in recall/ranking.py): a statement
# anywhere else is a store/ function waiting to be written.
SQL_STATEMENT = re.compile(
    r"^\s*(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH \w+ AS|CREATE (TABLE|INDEX|DATABASE|EXTENSION)"
    r"|DROP (TABLE|INDEX|DATABASE)|ALTER TABLE|TRUNCATE|VACUUM|ANALYZE|SET (TRANSACTION|LOCAL)|LOCK TABLE)\b"
)


def sql_outside_the_store() -> dict[str, list[str]]:
    """{file: ["line: statement start", ...]} for every string (or f-string) outside store/ and
    recall/ranking.py that starts like a SQL statement."""
    import ast

    found: dict[str, list[str]] = {}
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("anima_pipeline/store/") or rel == "anima_pipeline/recall/ranking.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            else:
                continue
            if SQL_STATEMENT.match(text):
                found.setdefault(rel, []).append(f"{node.lineno}: {' '.join(text.split())[:70]}")
    return found


def test_no_sql_outside_the_store() -> None:
    found = sql_outside_the_store()
    assert found == {}, "SQL belongs in anima_pipeline/store/ (a function there, called from here)"


def test_the_sql_scan_sees_statements_and_not_prose() -> None:
    assert SQL_STATEMENT.match("SELECT count(*) AS n FROM message")
    assert SQL_STATEMENT.match("\n    WITH ev AS (SELECT 1) SELECT * FROM ev")
    assert SQL_STATEMENT.match("SET TRANSACTION READ ONLY")
    assert not SQL_STATEMENT.match("Drop interjections, fillers and vocatives")
    assert not SQL_STATEMENT.match("select the day's memories")
    assert "anima_pipeline/recall/resident.py" not in sql_outside_the_store()  # the resident read moved


def test_the_planning_switch_is_scoped_to_the_call_and_its_thread(monkeypatch) -> None:
    """Dagster's DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS is set only inside the call
    that creates a run, restored after it, and two threads never see each other's value."""
    import os
    import threading

    from anima_pipeline.defs.night.launch import PLANNED_AS_SUBSET_ENV, plan_range_as_one_event

    monkeypatch.setenv(PLANNED_AS_SUBSET_ENV, "ambient")
    with plan_range_as_one_event(True):
        assert os.environ[PLANNED_AS_SUBSET_ENV] == "true"
    with plan_range_as_one_event(False):
        assert PLANNED_AS_SUBSET_ENV not in os.environ
    assert os.environ[PLANNED_AS_SUBSET_ENV] == "ambient"

    seen: list[tuple[bool, str | None]] = []

    def create(enabled: bool) -> None:
        for _ in range(200):
            with plan_range_as_one_event(enabled):
                seen.append((enabled, os.environ.get(PLANNED_AS_SUBSET_ENV)))

    threads = [threading.Thread(target=create, args=(flag,)) for flag in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 400 and all((value == "true") == enabled for enabled, value in seen)
    assert os.environ[PLANNED_AS_SUBSET_ENV] == "ambient"


def test_tests_and_benchmarks_do_not_import_each_other() -> None:
    """What both need lives in testkit/, which imports neither."""
    import ast

    wrong = []
    for folder, other in (("anima_pipeline_tests", "benchmarks"), ("benchmarks", "anima_pipeline_tests")):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else []
                )
                wrong += [
                    f"{path.relative_to(REPO)}:{node.lineno} imports {n}"
                    for n in names
                    if n.split(".")[0] == other
                ]
    for path in sorted((REPO / "testkit").rglob("*.py")):
        text = path.read_text()
        wrong += [
            f"{path.relative_to(REPO)} imports {o}"
            for o in ("anima_pipeline_tests", "benchmarks")
            if f"from {o}" in text or f"import {o}" in text
        ]
    assert wrong == []
