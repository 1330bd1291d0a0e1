"""Rules over the source itself: checked by reading the code, no database needed."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "anima_pipeline"
BROAD = {"Exception", "BaseException"}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log", "warn"}

# Known offenders, each with who fixes it; an entry that no longer matches is harmless.
PENDING: set[tuple[str, str]] = {
    # the DAGSTER_PG_URL guard should refuse a URL it cannot parse, not catch every error
    ("defs/instance.py", "_same_database"),
}


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in BROAD for n in names)


def _raises_or_logs(handler: ast.ExceptHandler) -> bool:
    """Raises, logs, or hands the caught exception on (a failure record that carries it)."""
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if handler.name and isinstance(node, ast.Name) and node.id == handler.name:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in LOG_METHODS:
                return True
    return False


def silent_broad_excepts(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of each `except Exception` / `except BaseException` / bare
    `except` whose body neither raises, logs nor passes the exception on."""
    tree = ast.parse(source)
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            if isinstance(child, ast.ExceptHandler) and _is_broad(child) and not _raises_or_logs(child):
                found.append((child.lineno, where))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_the_scan_catches_a_silent_handler_and_accepts_logged_or_raised_ones() -> None:
    silent = "def f():\n    try:\n        g()\n    except Exception:\n        return None\n"
    bare = "try:\n    g()\nexcept:\n    pass\n"
    tupled = "try:\n    g()\nexcept (ValueError, Exception):\n    x = 1\n"
    logged = "try:\n    g()\nexcept Exception as e:\n    logger.warning('g failed: %s', e)\n"
    raised = "try:\n    g()\nexcept BaseException as e:\n    raise RuntimeError('g') from e\n"
    narrow = "try:\n    g()\nexcept KeyError:\n    pass\n"
    passed_on = "try:\n    g()\nexcept Exception as e:\n    failed = Failure(cause=e)\n"
    bound_unused = "try:\n    g()\nexcept Exception as e:\n    return None\n"
    assert silent_broad_excepts(silent) == [(4, "f")]
    assert silent_broad_excepts(bare) == [(3, "<module>")]
    assert silent_broad_excepts(tupled) == [(3, "<module>")]
    assert silent_broad_excepts(logged) == silent_broad_excepts(raised) == silent_broad_excepts(narrow) == []
    assert silent_broad_excepts(passed_on) == [] and silent_broad_excepts(bound_unused) == [(3, "<module>")]


def test_no_broad_except_in_the_package_neither_logs_nor_reraises() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for line, where in silent_broad_excepts(path.read_text()):
            if (rel, where) not in PENDING:
                offenders.append(f"anima_pipeline/{rel}:{line} (in {where})")
    assert not offenders, "broad except that neither logs nor re-raises:\n" + "\n".join(offenders)


def test_no_comment_cites_a_design_section_outside_the_repository() -> None:
    # store/sql/ is left out (not .py or .md): an applied migration's text is checksummed and may not change
    roots = [PACKAGE, PACKAGE.parent / "benchmarks", PACKAGE.parent / "testkit", PACKAGE.parent / "docs"]
    cited = [
        str(p.relative_to(PACKAGE.parent))
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.suffix in (".py", ".md") and "DESIGN §" in p.read_text(encoding="utf-8")
    ]
    assert not cited, f"cites DESIGN §N, which is not in the repository: {cited}"


# Files still quoting the evaluation data, each with who fixes it (none today).
QUOTING_PENDING: set[str] = set()


def _our_text_files() -> list[Path]:
    root = PACKAGE.parent
    return [
        p
        for folder in ("anima_pipeline", "anima_pipeline_tests", "benchmarks", "testkit", "docs")
        for p in sorted((root / folder).rglob("*"))
        if p.suffix in (".py", ".md", ".jsonl") and p.relative_to(root).as_posix() not in QUOTING_PENDING
    ]


def test_no_sentence_or_speaker_of_the_evaluation_data_in_the_repository() -> None:
    """LoCoMo is CC BY-NC and the figures must hold on unseen text: neither a run of 8 words
    (12 Chinese characters) of the evaluation dialogues nor a LoCoMo speaker's name may
    stand in code, comments, tests or docs."""
    import json
    import re

    from testkit.data import data_dir

    sources = [
        data_dir() / "locomo" / "dev.archive.jsonl",
        *sorted((data_dir() / "memorybank").glob("*.archive.jsonl")),
    ]
    if not sources[0].exists():
        pytest.skip(f"evaluation data not present under {data_dir()}")
    words = re.compile(r"[a-z0-9']+")
    runs: set[tuple[str, ...]] = set()
    han: set[str] = set()
    names: set[str] = set()
    for path in sources:
        for line in path.open(encoding="utf-8"):
            m = json.loads(line)
            if path.parent.name == "locomo":
                names.add(m["speaker"])
            w = words.findall(m["content"].lower())
            runs.update(tuple(w[i : i + 8]) for i in range(len(w) - 7))
            text = re.sub(r"\s", "", m["content"])
            han.update(
                text[i : i + 12]
                for i in range(len(text) - 11)
                if re.search(r"[\u4e00-\u9fff]{6}", text[i : i + 12])
            )
    name = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
    found = []
    for p in _our_text_files():
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            w = words.findall(line.lower())
            text = re.sub(r"\s", "", line)
            if (
                any(tuple(w[i : i + 8]) in runs for i in range(len(w) - 7))
                or any(text[i : i + 12] in han for i in range(len(text) - 11))
                or name.search(line)
            ):
                found.append(f"{p.relative_to(PACKAGE.parent)}:{n}")
    assert not found, "quotes the evaluation data (a sentence or a speaker's name):\n" + "\n".join(found)


def _runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import outside `if TYPE_CHECKING:` blocks."""
    type_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in type_only or not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        out += [(node.lineno, n) for n in names]
    return out


def test_the_offline_engine_needs_no_database_no_dagster_and_no_step_module() -> None:
    """text/ and the offline plans of night/steps/ (each folder's plan.py and every module of
    night/steps/ or text/ it imports) hold pure functions from a step's inputs to tool calls
    (type-only imports aside): no store, no Dagster, no step frame."""
    forbidden = ("anima_pipeline.night.frame", "anima_pipeline.night.registry", "anima_pipeline.defs",
                 "anima_pipeline.store", "anima_pipeline.cli", "anima_pipeline.service", "anima_pipeline.recall",
                 "anima_pipeline.memory", "psycopg", "dagster")  # fmt: skip
    pure_rooms = ("anima_pipeline.night.steps.", "anima_pipeline.text.")
    todo = [*(PACKAGE / "text").glob("*.py"), *(PACKAGE / "night" / "steps").glob("*/plan.py")]
    seen: set[Path] = set()
    found = []
    while todo:
        path = todo.pop()
        if path in seen or path.name == "__init__.py":
            continue
        seen.add(path)
        for line, name in _runtime_imports(ast.parse(path.read_text())):
            if name.startswith(forbidden):
                found.append(f"{path.relative_to(PACKAGE)}:{line} {name}")
            elif name.startswith(pure_rooms):
                module = PACKAGE.parent / (name.replace(".", "/") + ".py")
                if module.exists():
                    todo.append(module)
    assert len(seen) > 30 and not found, found
