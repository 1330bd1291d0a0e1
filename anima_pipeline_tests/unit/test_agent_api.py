"""One model of the agent API: the facade and the client implement one Protocol with the same
signatures, the vocabularies are written once, and every error of the package carries what
the faces answer it with (its code, HTTP status and exit code)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from typing import Any

import pytest

from anima_pipeline.core import types
from anima_pipeline.core.errors import AnimaError
from anima_pipeline.memory.api import AnimaMemoryAPI
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.service.client import AnimaClient
from anima_pipeline_tests.conftest import REPO
from anima_pipeline_tests.unit.test_code_health import package_modules

# public members of the facade that are not operations of the agent API: how it is built
FACADE_ONLY = {"engine", "db", "settings"}


def operations(cls: type) -> set[str]:
    """The public methods of `cls` (and the context manager's two), properties left out."""
    return {
        name
        for name, value in vars(cls).items()
        if callable(value) and (not name.startswith("_") or name in ("__enter__", "__exit__"))
    } - {"__init__"}


def differences(protocol: type, cls: type) -> list[str]:
    """What `cls` does otherwise than `protocol`: a missing or extra operation, or a parameter
    (name, kind, default, annotation) or return annotation that is not the same."""
    out = [f"{cls.__name__} lacks {name}" for name in sorted(operations(protocol) - operations(cls))]
    out += [
        f"{cls.__name__}.{name} is not in {protocol.__name__}"
        for name in sorted(operations(cls) - operations(protocol) - FACADE_ONLY)
    ]
    for name in sorted(operations(protocol) & operations(cls)):
        want, have = inspect.signature(getattr(protocol, name)), inspect.signature(getattr(cls, name))
        if [_param(p) for p in want.parameters.values()] != [_param(p) for p in have.parameters.values()]:
            out.append(f"{cls.__name__}.{name}{have} differs from {protocol.__name__}.{name}{want}")
        elif want.return_annotation != have.return_annotation:
            out.append(
                f"{cls.__name__}.{name} returns {have.return_annotation}, not {want.return_annotation}"
            )
    return out


def _param(p: inspect.Parameter) -> tuple[Any, ...]:
    return (p.name, p.kind, p.default, p.annotation)


@pytest.mark.parametrize("cls", [AnimaMemory, AnimaClient], ids=lambda c: c.__name__)
def test_the_facade_and_the_client_implement_the_one_protocol(cls: type) -> None:
    assert differences(AnimaMemoryAPI, cls) == []
    assert "anima_id" in AnimaMemoryAPI.__annotations__


def test_the_comparison_fails_on_any_difference() -> None:
    class Other:
        def close(self) -> None: ...

        def search(self, query: str, *, types: list[str] | None = None, limit: int = 10) -> None: ...

        def purge_everything(self) -> None: ...

    found = differences(AnimaMemoryAPI, Other)
    assert "Other lacks append" in found and "Other.purge_everything is not in AnimaMemoryAPI" in found
    assert any(line.startswith("Other.search(") for line in found)
    assert not any(line.startswith("Other.close") for line in found)


VOCABULARIES = {
    name: set(getattr(types, name))
    for name in (
        "MEMORY_TYPES",
        "ROLES",
        "SIGNIFICANCE",
        "LEVELS",
        "SELF_BLOCKS",
        "PROPOSAL_STATUSES",
        "TARGET_KINDS",
    )
}


def test_the_vocabularies_are_written_once_in_core_types() -> None:
    """No other module lists all the values of one (in a Literal, a tuple, a list or a set)."""
    found = []
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        if path.relative_to(REPO).as_posix() == "anima_pipeline/core/types.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                values = {
                    e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
                found += [
                    f"{path.relative_to(REPO)}:{node.lineno}: {name}"
                    for name, vocabulary in VOCABULARIES.items()
                    if vocabulary <= values
                ]
    assert found == []


def every_error_class() -> list[type[AnimaError]]:
    for name in package_modules():
        importlib.import_module(name)
    out, todo = [], [AnimaError]
    while todo:
        cls = todo.pop()
        out.append(cls)
        todo += cls.__subclasses__()
    return [c for c in out if c.__module__.startswith("anima_pipeline.")]


def test_every_error_says_how_each_face_answers_it() -> None:
    classes = every_error_class()
    assert len(classes) >= 50
    for cls in classes:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", cls.code), cls
        assert 400 <= cls.http_status <= 599, cls
        assert cls.exit_code in (1, 2), cls
        assert cls.label and cls.label == cls.label.lower(), cls


# raises the scan allows: a Mapping's KeyError, an abstract method, and a pydantic validator's
# ValueError (pydantic turns it into its ValidationError, which the caller maps)
_PROTOCOL = {"KeyError": {"__getitem__"}}
_VALIDATORS = ("field_validator", "model_validator")
_BUILTINS = {
    "ValueError",
    "RuntimeError",
    "LookupError",
    "KeyError",
    "TypeError",
    "PermissionError",
    "OSError",
}


def test_no_module_raises_a_bare_builtin_error() -> None:
    found = []
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if any(ast.unparse(d).split("(")[0] in _VALIDATORS for d in fn.decorator_list):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                    name = ast.unparse(raised)
                    if name in _BUILTINS and fn.name not in _PROTOCOL.get(name, ()):
                        found.append(f"{path.relative_to(REPO)}:{node.lineno}: {name} in {fn.name}")
    assert found == []
