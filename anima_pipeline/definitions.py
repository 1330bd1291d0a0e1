"""The Dagster code location: everything under anima_pipeline/defs/, loaded by folder
(dg.load_from_defs_folder reads [tool.dg.project] in pyproject.toml: defs_module =
anima_pipeline.defs). `dagster dev -w workspace.yaml` or `dg dev` from the repo root.

Importing this module builds nothing and opens no database connection: `defs` is a
`@dg.definitions` function, which Dagster calls when it loads the code location (and the
run worker when it starts a run). Only then are the settings read and the store's first day
looked up in the memory database (defs/night/partitions.py)."""

from __future__ import annotations

import dagster as dg

from anima_pipeline.packaged import project_dir


def load() -> dg.Definitions:
    """The definitions as they are now (the partitions start at the store's first day, read
    when they load): the CLI calls this for each launch, the code location once per load."""
    return dg.load_from_defs_folder(path_within_project=project_dir())


@dg.definitions
def defs() -> dg.Definitions:
    return load()
