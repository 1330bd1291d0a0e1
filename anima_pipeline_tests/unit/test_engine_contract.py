"""One engine protocol (llm/contract.py's `Engine`): no code outside llm/ asks which engine it
has, ANIMA_ENGINE's values and the factory's table are one list, and building the offline
engine does not import the provider's SDK."""

from __future__ import annotations

import ast
import subprocess
import sys
from typing import get_args

import pytest

from anima_pipeline.config import EngineName, Settings
from anima_pipeline.llm.factory import ENGINES, engine_class
from anima_pipeline_tests.conftest import REPO


def _engine_ish(node: ast.expr) -> bool:
    """An engine, its name or the engine setting: `settings.engine`, `engine.name`,
    `self.engine.name`, a variable named for an engine."""
    if isinstance(node, ast.Attribute):
        return node.attr == "engine" or (node.attr == "name" and "engine" in ast.unparse(node.value).lower())
    return isinstance(node, ast.Name) and "engine" in node.id.lower()


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for e in node.elts for s in _strings(e)]
    return []


def engine_questions(source: str, where: str = "<code>") -> list[str]:
    """Every place in `source` that asks which engine it has: a comparison of an engine, its
    name or the engine setting with a string, any comparison with an engine's name, a `match`
    on one, and getattr / hasattr on an engine."""
    names = set(get_args(EngineName))
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            strings = [s for o in operands for s in _strings(o)]
            if (strings and any(_engine_ish(o) for o in operands)) or names & set(strings):
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Match) and _engine_ish(node.subject):
            found.append(f"{where}:{node.lineno}: match {ast.unparse(node.subject)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
            and _engine_ish(node.args[0])
        ):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_llm_asks_which_engine_it_has() -> None:
    """What differs between engines is a property or method of the engine (llm/contract.py):
    outside llm/ nothing compares an engine's name or ANIMA_ENGINE with a string."""
    found = []
    for path in sorted((REPO / "anima_pipeline").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if not rel.startswith("anima_pipeline/llm/"):
            found += engine_questions(path.read_text(), rel)
    assert found == []


@pytest.mark.parametrize(
    "code",
    [
        'if settings.engine == "anthropic": pass',
        'llm = settings().engine != "offline"',
        'kind = "threads" if self.engine.name == "offline" else "processes"',
        'ok = night.engine.name in ("offline", "estimate")',
        'ok = "anthropic" == provider',
        'name = getattr(engine, "name", "?")',
        'judged = hasattr(self.engine, "complete")',
        'match settings.engine:\n    case "offline":\n        pass',
    ],
)
def test_the_scan_sees_each_way_of_asking(code: str) -> None:
    assert len(engine_questions(code)) == 1


def test_the_scan_leaves_other_names_alone() -> None:
    code = (
        'a = s.name == "summaries"\nb = self._engine is None\nc = engine.model is not None\nd = engine.name'
    )
    assert engine_questions(code) == []


def test_every_engine_setting_has_its_engine_class() -> None:
    assert list(ENGINES) == list(get_args(EngineName))
    for name, cls in ENGINES.items():
        assert cls.name == name and engine_class(Settings(engine=name)) is cls
    with pytest.raises(
        ValueError, match=r"ANIMA_ENGINE must be 'offline', 'anthropic' or 'openai', got 'gpt'"
    ):
        Settings(engine="gpt")  # type: ignore[arg-type]


@pytest.mark.processes  # a fresh interpreter is the point
def test_the_offline_engine_loads_no_provider_sdk() -> None:
    """The factory imports every engine class; a provider's SDK loads only with its engine
    (llm/anthropic/sdk.py, llm/openai/sdk.py)."""
    code = (
        "import sys; from anima_pipeline.config import Settings; "
        "from anima_pipeline.llm.factory import make_engine; e = make_engine(Settings()); "
        "e.summarizer(lambda: '', Settings().tz); "
        "print(e.name, sorted(m for m in sys.modules if m.split('.')[0] in ('anthropic', 'openai')))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["offline", "[]"]
