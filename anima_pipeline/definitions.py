"""The Dagster code location: everything under anima_pipeline/defs/, loaded by folder
(dg.load_from_defs_folder reads [tool.dg.project] in pyproject.toml: defs_module =
anima_pipeline.defs). `dagster dev -w workspace.yaml` or `dg dev` from the repo root."""

from __future__ import annotations

import dagster as dg

from anima_pipeline.packaged import project_dir


def load() -> dg.Definitions:
    """The definitions as they are now (the partitions start at the store's first day, read
    when they load): the CLI calls this for each launch, the code location once."""
    return dg.load_from_defs_folder(path_within_project=project_dir())


defs: dg.Definitions = load()
