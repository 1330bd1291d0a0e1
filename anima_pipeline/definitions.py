"""The Dagster code location: everything under anima_pipeline/defs/, loaded by folder
(dg.load_from_defs_folder reads the project settings in this package's dg.toml: defs_module =
anima_pipeline.defs; the checkout's top-level dg.toml is a link to it, for the `dg` CLI).
`dagster dev -w workspace.yaml` or `dg dev` from the repo root.

Importing this module builds nothing and opens no database connection: `defs` is a
`@dg.definitions` function, which Dagster calls when it loads the code location (and the
run worker when it starts a run). Only then are the settings read and the store's first day
looked up in the memory database, if one is running: loading starts no server and writes
nothing (defs/night/partitions.py)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

PROJECT = Path(__file__).resolve().parent  # holds dg.toml (package data, as in a wheel)


def checkout() -> Path | None:
    """The source checkout this package runs from (the folder of workspace.yaml, where `dg dev`
    runs), or None when it runs from an installed wheel."""
    root = PROJECT.parent
    return root if (root / "pyproject.toml").is_file() and (root / "workspace.yaml").is_file() else None


def load() -> dg.Definitions:
    """The definitions as they are now (the partitions start at the store's first day, read
    when they load): the CLI calls this for each launch, the code location once per load."""
    return dg.load_from_defs_folder(path_within_project=PROJECT)


@dg.definitions
def defs() -> dg.Definitions:
    return load()
