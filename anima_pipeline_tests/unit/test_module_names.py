"""One file name, one concept: a module's basename says what it holds, anywhere in the package
(docs/decisions.md, "Step folders"). The exceptions are the package markers, the role names
every step folder shares (night/steps/<step>/step.py, prompt.py ...), the role names every
provider's engine folder shares (llm/<provider>/engine.py, sdk.py) and cli/, whose modules are
named for their command."""

from __future__ import annotations

from collections import defaultdict
from pathlib import PurePosixPath

from anima_pipeline_tests.conftest import REPO

PACKAGE = REPO / "anima_pipeline"
MARKERS = {"__init__.py", "__main__.py"}
STEP_ROLES = {"step.py", "prompt.py", "plan.py", "tools.py", "preview.py"}
ENGINE_ROLES = {"engine.py", "sdk.py"}  # llm/anthropic/, llm/openai/: the engine, its SDK imported lazily


def modules() -> list[PurePosixPath]:
    """Every module of the package but the markers and cli/, relative to the package."""
    return [
        PurePosixPath(p.relative_to(PACKAGE).as_posix())
        for p in sorted(PACKAGE.rglob("*.py"))
        if p.name not in MARKERS and p.relative_to(PACKAGE).parts[0] != "cli"
    ]


def in_step_folder(rel: PurePosixPath) -> bool:
    return rel.parts[:2] == ("night", "steps") and len(rel.parts) == 4


def in_engine_folder(rel: PurePosixPath) -> bool:
    return rel.parts[0] == "llm" and len(rel.parts) == 3


def test_every_module_basename_is_used_once() -> None:
    found: dict[str, list[str]] = defaultdict(list)
    for rel in modules():
        shared_role = (rel.name in STEP_ROLES and in_step_folder(rel)) or (
            rel.name in ENGINE_ROLES and in_engine_folder(rel)
        )
        if not shared_role:
            found[rel.name].append(str(rel))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}


def test_the_step_roles_name_files_of_step_folders_only() -> None:
    assert [str(rel) for rel in modules() if rel.name in STEP_ROLES and not in_step_folder(rel)] == []


def test_the_engine_roles_name_files_of_engine_folders_only() -> None:
    assert [str(rel) for rel in modules() if rel.name in ENGINE_ROLES and not in_engine_folder(rel)] == []
