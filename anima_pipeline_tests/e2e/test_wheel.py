"""Packaging: the wheel `python -m build` makes installs into a fresh venv and runs `anima
demo` from another folder, on an empty database its own migrations create.

Marked `packaging` (run by `make test` like every test; `-m "not packaging"` skips it). The
fresh venv gets the wheel with pip and, for speed, borrows the already-installed dependencies
of this venv through a .pth line (such a path's own .pth files are not processed, so this
checkout's editable install stays invisible there: the package comes from the wheel)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from anima_pipeline_tests.conftest import AMBIENT, REPO

pytestmark = pytest.mark.packaging


def _run(args: list, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, f"{args}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_the_built_wheel_runs_the_demo_in_a_fresh_venv(empty_db_url: str, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    # sdist first, then the wheel from the unpacked sdist (what `python -m build` does)
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, REPO])
    [wheel] = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    migrations = sorted(p.name for p in (REPO / "anima_pipeline" / "store" / "sql").glob("*.sql"))
    assert (
        sorted(n.rsplit("/", 1)[1] for n in names if n.startswith("anima_pipeline/store/sql/")) == migrations
    )
    assert {
        "anima_pipeline/defs/dagster.yaml",
        "anima_pipeline/defs/workspace.yaml",
        "anima_pipeline/dg.toml",
    } <= set(names)
    # the package only: no tests, no test doubles
    assert {n.split("/", 1)[0] for n in names if "/" in n} == {
        "anima_pipeline",
        "anima_pipeline-0.1.0.dist-info",
    }

    venv = tmp_path / "fresh"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", wheel])
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
    (site / "borrowed_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (*AMBIENT, "PYTHONPATH", "DAGSTER_HOME")}
    env.update(ANIMA_HOME=str(tmp_path / "home"), ANIMA_DATABASE_URL=empty_db_url)
    where = _run(
        [python, "-c", "import anima_pipeline; print(anima_pipeline.__file__)"], cwd=elsewhere, env=env
    )
    assert where.stdout.strip().startswith(str(site))  # the wheel's package, not this checkout

    demo = _run([venv / "bin" / "anima", "demo"], cwd=elsewhere, env=env)
    assert "semantic memories of aria" in demo.stdout
    # no checkout to `dg dev` in: the package's workspace (the location named as dg.toml says),
    # with DAGSTER_HOME set so that Dagster writes no temporary instance into site-packages
    home = Path(env["ANIMA_HOME"]) / "dagster"
    command = f"DAGSTER_HOME={home} dagster dev -w {site}/anima_pipeline/defs/workspace.yaml"
    assert command in " ".join(demo.stdout.split()), demo.stdout
    linked = home / "dagster.yaml"  # the template, linked, not a copy
    assert linked.is_symlink() and linked.resolve() == (site / "anima_pipeline/defs/dagster.yaml").resolve()
    assert (Path(env["ANIMA_HOME"]) / "dagster" / "storage").is_dir()
