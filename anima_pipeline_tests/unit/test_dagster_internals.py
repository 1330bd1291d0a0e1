"""The package imports Dagster's private modules only for the names docs/decisions.md lists
("Dagster internals"), each with its reason: a new one fails here until it is listed (or
replaced by public API)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def private_dagster_imports() -> dict[str, set[str]]:
    """{file under anima_pipeline/: names imported from a `dagster._…` module}, imports inside
    functions included."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster._"):
                rel = path.relative_to(REPO / "anima_pipeline").as_posix()
                found.setdefault(rel, set()).update(a.name for a in node.names)
            elif isinstance(node, ast.Import) and any(a.name.startswith("dagster._") for a in node.names):
                found.setdefault(path.relative_to(REPO / "anima_pipeline").as_posix(), set()).add("<import>")
    return found


def listed() -> dict[str, set[str]]:
    text = (REPO / "docs" / "decisions.md").read_text(encoding="utf-8")
    section = text.split("## Dagster internals", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].endswith(".py"):
            rows.setdefault(cells[0], set()).update(re.findall(r"`([^`]+)`", cells[1]))
    return rows


def test_every_private_dagster_import_is_listed_with_its_reason() -> None:
    assert private_dagster_imports() == listed()
