"""The Dagster code location: everything under anima_pipeline/defs/, loaded by folder
(dg.load_from_defs_folder reads [tool.dg.project] in pyproject.toml: defs_module =
anima_pipeline.defs). `dagster dev -w workspace.yaml` or `dg dev` from the repo root."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

defs: dg.Definitions = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
