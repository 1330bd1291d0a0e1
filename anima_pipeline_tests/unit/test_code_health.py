"""Code-health rules a newcomer relies on: one error hierarchy, the step names as one type,
settings that do not pull in the night's engine, SQL and connections only in store/ (the layer
contract is test_layers.py; docs/decisions.md)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys

import pytest

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


@pytest.mark.processes  # a fresh interpreter is the point
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


# SQL lives in store/ (docs/decisions.md, "SQL only in store/"): a statement, a fragment of one
# (a filter, a scoring expression) or a constant holding either anywhere else is a store/
# function waiting to be written; so is a connection opened anywhere else.
SQL_STATEMENT = re.compile(
    r"^\s*(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH \w+ AS|CREATE (TABLE|INDEX|DATABASE|EXTENSION)"
    r"|DROP (TABLE|INDEX|DATABASE)|ALTER TABLE|TRUNCATE|VACUUM|ANALYZE|SET (TRANSACTION|LOCAL)|LOCK TABLE)\b"
)
# A piece of a statement: a cast, an upper-case clause keyword as the code writes them, or a
# named placeholder in a condition (a placeholder alone is also logging's format).
SQL_FRAGMENT = re.compile(
    r"::(text|int|bigint|date|timestamptz|tsquery|tsvector|vector|regconfig|regclass|jsonb)\b"
    r"|\b(SELECT|WHERE|JOIN|ORDER BY|GROUP BY|UNION ALL|IS NULL|IS NOT NULL|INSERT INTO|ON CONFLICT|RETURNING)\b"
    r"|%\(\w+\)s.*\b(AND|OR)\b|\b(AND|OR)\b.*%\(\w+\)s|[=<>]\s*%\(\w+\)s"
)


def _outside_the_store() -> list[tuple[str, ast.Module]]:
    return [
        (rel, ast.parse(path.read_text(), rel))
        for path in sorted((REPO / "anima_pipeline").rglob("*.py"))
        if not (rel := path.relative_to(REPO).as_posix()).startswith("anima_pipeline/store/")
    ]


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, text) of every string and f-string (its constant parts), docstrings left out."""
    docs = {
        id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            out.append((node.lineno, "".join(v.value for v in node.values if isinstance(v, ast.Constant))))
    return out


def sql_outside_the_store() -> dict[str, list[str]]:
    """{file: ["line: text", ...]} for every string (or f-string) outside store/ that starts like
    a SQL statement or holds a piece of one, and every name imported from a module of the
    package that is SQL (a string that looks like it, or a name that says so)."""
    found: dict[str, list[str]] = {}
    for rel, tree in _outside_the_store():
        for line, text in _strings(tree):
            if SQL_STATEMENT.match(text) or SQL_FRAGMENT.search(text):
                found.setdefault(rel, []).append(f"{line}: {' '.join(text.split())[:70]}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("anima_pipeline"):
                for alias in node.names:
                    value = getattr(importlib.import_module(node.module), alias.name, None)
                    is_sql = isinstance(value, str) and (
                        SQL_STATEMENT.match(value) or SQL_FRAGMENT.search(value)
                    )
                    if is_sql or re.search(r"(?i)(^|_)sql(_|$)", alias.name):
                        found.setdefault(rel, []).append(f"{node.lineno}: imports {node.module}.{alias.name}")
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
    # the pieces a module could hold as constants or pass on: a filter, a cast, a scoring term
    assert SQL_FRAGMENT.search("x.anima_id = %(anima)s AND x.status = 'active'")
    assert SQL_FRAGMENT.search("coalesce(ts_rank_cd(x.fts, q::tsquery, 32), 0) AS rank_cd")
    assert SQL_FRAGMENT.search("x.speaker = %(speaker)s")
    assert not SQL_FRAGMENT.search("where the night went: select one memory, then join them")
    assert not SQL_FRAGMENT.search("%(asctime)s %(levelname)s %(message)s")  # logging's format
    assert "anima_pipeline/recall/resident.py" not in sql_outside_the_store()  # the resident read moved


def test_the_sql_scan_sees_a_constant_and_an_import_of_sql(tmp_path, monkeypatch) -> None:
    """A module-level constant holding a filter, and a name imported from a store module that
    holds SQL, are both found (a fabricated module beside the package's)."""
    from anima_pipeline.store import invariants

    tree = ast.parse(
        "from anima_pipeline.store.invariants import NORMALIZED_CONTENT_SQL\n"
        "WHERE_ACTIVE = \"x.status = 'active' AND x.anima_id = %(anima)s\"\n"
    )
    monkeypatch.setattr(
        sys.modules[__name__], "_outside_the_store", lambda: [("anima_pipeline/recall/fabricated.py", tree)]
    )
    assert invariants.NORMALIZED_CONTENT_SQL
    assert sql_outside_the_store() == {
        "anima_pipeline/recall/fabricated.py": [
            "2: x.status = 'active' AND x.anima_id = %(anima)s",
            "1: imports anima_pipeline.store.invariants.NORMALIZED_CONTENT_SQL",
        ]
    }


def connections_outside_the_store() -> list[str]:
    """Every `psycopg.connect(...)` (or `Connection.connect`, a `ConnectionPool`) outside store/."""
    found = []
    for rel, tree in _outside_the_store():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            if (name == "connect" and owner in ("psycopg", "Connection", "AsyncConnection")) or name in (
                "ConnectionPool",
                "AsyncConnectionPool",
            ):
                found.append(f"{rel}:{node.lineno}: {owner + '.' if owner else ''}{name}(...)")
            if isinstance(f, ast.Name) and f.id == "connect":  # `from psycopg import connect`
                imported = {
                    (n.module, a.name)
                    for n in ast.walk(tree)
                    if isinstance(n, ast.ImportFrom)
                    for a in n.names
                }
                if ("psycopg", "connect") in imported:
                    found.append(f"{rel}:{node.lineno}: connect(...) from psycopg")
    return found


def test_no_connection_is_opened_outside_the_store() -> None:
    """A connection comes from store/: store.db's Database, OneConnection and connect()."""
    assert connections_outside_the_store() == []


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
