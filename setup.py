"""Build-time mapping of the repository's top level into the package (pyproject.toml holds
everything else): the wheel carries sql/*.sql and dagster.yaml under anima_pipeline/_top/,
where anima_pipeline.packaged finds them outside a source checkout, and a dg.toml holding
pyproject.toml's [tool.dg.project] (Dagster's load_from_defs_folder reads the project there)."""

import shutil
import tomllib
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithTopLevel(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):  # an editable install reads the checkout itself
            return
        target = Path(self.build_lib) / "anima_pipeline" / "_top"
        (target / "sql").mkdir(parents=True, exist_ok=True)
        for migration in sorted((ROOT / "sql").glob("*.sql")):
            shutil.copyfile(migration, target / "sql" / migration.name)
        shutil.copyfile(ROOT / "dagster.yaml", target / "dagster.yaml")
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]
        lines = ['directory_type = "project"', "", "[project]"]
        lines += [f'{key} = "{value}"' for key, value in project.items()]
        (target / "dg.toml").write_text("\n".join(lines) + "\n")


setup(cmdclass={"build_py": BuildPyWithTopLevel})
