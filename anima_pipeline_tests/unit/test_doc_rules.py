"""Rules for the words of the code (docs/architecture.md; the preamble of README's "Layout").

- A comment or docstring says the fact itself or cites this repository's docs (docs/*.md,
  README): never "the seed(s)", a design card or an issue number, none of which a reader of
  the repository can open. Comments are read with `tokenize`, docstrings (module, class,
  function) with `ast`, in every .py file of the package, its tests, testkit and benchmarks.
- docs/architecture.md names every folder of the package (as `folder/`, its path under
  anima_pipeline/), so a new folder cannot go unexplained.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from anima_pipeline_tests.conftest import REPO

ROOTS = ("anima_pipeline", "anima_pipeline_tests", "testkit", "benchmarks")
# Known offenders, each with who fixes it; an entry that no longer matches is harmless.
PENDING: set[tuple[str, str]] = set()
ARCHITECTURE = REPO / "docs" / "architecture.md"

# What points outside the repository. "seed" as a word (the seed, the seeds, the seed's, the
# context-management seed, "Seed:"), not "seeded", "seed_content" or a random generator's seed.
CITATIONS = re.compile(
    r"(?<!random )(?<!--)\bseeds?\b(?!\s*=)(?!\()"
    r"|\bdesign[\s-]+cards?\b"
    r"|\bissues?\s*#?\s*\d+"
    r"|\bissue\s*#",
    re.IGNORECASE,
)


def comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and every module, class and function docstring."""
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text is not None:
                yield node.body[0].lineno, text


def citations(source: str) -> list[tuple[int, str]]:
    """(line, what) of every citation of the seed(s), a design card or an issue number."""
    found = []
    for start, text in comments_and_docstrings(source):
        for m in CITATIONS.finditer(text):
            found.append((start + text.count("\n", 0, m.start()), m.group(0)))
    return sorted(found)


def python_files(root: Path) -> list[Path]:
    return sorted(p for name in ROOTS for p in (root / name).rglob("*.py") if "__pycache__" not in p.parts)


def package_folders(root: Path) -> list[str]:
    """Every folder of the package holding a file, as its path under anima_pipeline/."""
    package = root / "anima_pipeline"
    return sorted(
        d.relative_to(package).as_posix()
        for d in package.rglob("*")
        if d.is_dir() and "__pycache__" not in d.parts and any(f.is_file() for f in d.iterdir())
    )


def test_no_comment_or_docstring_cites_the_seed_a_design_card_or_an_issue() -> None:
    files = python_files(REPO)
    wrong = [
        f"{path.relative_to(REPO)}:{line}: {what!r}"
        for path in files
        if path != Path(__file__).resolve()  # this file names what it refuses
        for line, what in citations(path.read_text(encoding="utf-8"))
        if (path.relative_to(REPO).as_posix(), what) not in PENDING
    ]
    assert len(files) > 250 and wrong == []


def test_the_architecture_page_names_every_package_folder() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    folders = package_folders(REPO)
    assert {"core", "night/steps/deep", "store/sql"} <= set(folders)
    assert [f for f in folders if f"{f}/" not in text] == []


def test_the_scan_finds_what_it_should_and_nothing_else() -> None:
    source = '''"""Module text (the context-management seed)."""
# follows the seeds' rule
x = 1  # Issue 11 item 1, and (issue 22)


def f(seed: int = 7):
    """A random seed, seeded memories, seed_content and `--seed` are fine; a design card is not."""
    s = "the seed in a string is data, not a comment"
    return random.Random(seed)  # seed=7 as well


class C:
    """Seed: "likes Python". See issue #4."""
'''
    assert citations(source) == [
        (1, "seed"),
        (2, "seeds"),
        (3, "Issue 11"),
        (3, "issue 22"),
        (7, "design card"),
        (13, "Seed"),
        (13, "issue #4"),
    ]
