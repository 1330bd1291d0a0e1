"""Code-health rules a newcomer relies on (issue 24): one error hierarchy, the step names as
one type, settings that do not pull in the night's engine."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys

import anima_pipeline
from anima_pipeline.errors import AnimaError

from .conftest import REPO


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
        "print(sorted(m for m in sys.modules if m.startswith(('anima_pipeline.sleep', "
        "'anima_pipeline.offline', 'dagster'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_step_names_are_written_once_in_steps_py() -> None:
    """Every other module names a step by its StepKey member, never by the bare string."""
    import ast

    from anima_pipeline.steps import STEP_ORDER

    names = set(STEP_ORDER)
    found = []
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        if path.name == "steps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value}")
    assert found == []
