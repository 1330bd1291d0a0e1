"""Files of the repository's top level that the package needs at run time: `sql/` (the
migrations), `dagster.yaml` (the Dagster instance template) and the dg project settings
(pyproject.toml's [tool.dg]; a wheel has them as `_top/dg.toml`).

They stay at the top level, where the design card puts them. A source checkout reads them
there; a built wheel carries them as package data under `anima_pipeline/_top/`, copied at
build time by setup.py's build_py (no second copy in git)."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
BUILT = _PACKAGE / "_top"  # present only in a built package


def top_level(name: str) -> Path:
    """The top-level file or folder `name` (`sql`, `dagster.yaml`) this package runs with."""
    built = BUILT / name
    return built if built.exists() else _PACKAGE.parent / name


def source_root() -> Path | None:
    """The checkout this package runs from, or None when it runs from an installed wheel."""
    root = _PACKAGE.parent
    return root if (root / "pyproject.toml").is_file() and (root / "workspace.yaml").is_file() else None


def project_dir() -> Path:
    """The folder whose pyproject.toml (a checkout) or dg.toml (a wheel) names the dg project."""
    return source_root() or BUILT
