"""Rules over the source itself: checked by reading the code, no database needed."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "anima_pipeline"
BROAD = {"Exception", "BaseException"}
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log", "warn"}

# Known offenders, each with who fixes it; an entry that no longer matches is harmless.
PENDING: set[tuple[str, str]] = {
    # the DAGSTER_PG_URL guard should refuse a URL it cannot parse (issue 13, item 5)
    ("defs/instance.py", "_same_database"),
}


def _is_broad(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, ast.Name) and n.id in BROAD for n in names)


def _raises_or_logs(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in LOG_METHODS:
                return True
    return False


def silent_broad_excepts(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function) of each `except Exception` / `except BaseException` / bare
    `except` whose body neither raises nor logs."""
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
    assert silent_broad_excepts(silent) == [(4, "f")]
    assert silent_broad_excepts(bare) == [(3, "<module>")]
    assert silent_broad_excepts(tupled) == [(3, "<module>")]
    assert silent_broad_excepts(logged) == silent_broad_excepts(raised) == silent_broad_excepts(narrow) == []


def test_no_broad_except_in_the_package_neither_logs_nor_reraises() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for line, where in silent_broad_excepts(path.read_text()):
            if (rel, where) not in PENDING:
                offenders.append(f"anima_pipeline/{rel}:{line} (in {where})")
    assert not offenders, "broad except that neither logs nor re-raises:\n" + "\n".join(offenders)


def test_no_comment_cites_a_design_section_outside_the_repository() -> None:
    # sql/ is left out: an applied migration's text is checksummed and may not change
    roots = [PACKAGE, PACKAGE.parent / "benchmarks", PACKAGE.parent / "docs"]
    cited = [
        str(p.relative_to(PACKAGE.parent))
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.suffix in (".py", ".md") and "DESIGN §" in p.read_text(encoding="utf-8")
    ]
    assert not cited, f"cites DESIGN §N, which is not in the repository: {cited}"
