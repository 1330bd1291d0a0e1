"""Plugins and markers for every test of the repository (anima_pipeline_tests and testkit/tests):
the process-hygiene check around each test (testkit/hygiene.py) and one marker per test folder
(docs/testing.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

try:  # threadpoolctl sets KMP_DUPLICATE_LIB_OK when first imported: once, here, not inside a test
    import threadpoolctl  # noqa: F401
except ImportError:
    pass

pytest_plugins = ["testkit.hygiene", "pytester"]

ROOT = Path(__file__).resolve().parent
FOLDERS = {"unit", "store", "night", "recall", "api", "dagster", "e2e"}
# whole folders whose tests start real processes (CLIs, dagster dev, servers, browsers)
PROCESS_FOLDERS = {"dagster", "e2e"}


def pytest_configure(config: pytest.Config) -> None:
    # Each xdist worker gets its own ANIMA_HOME and DAGSTER_HOME below the ones it was given, so
    # two workers never share an embedded server or a Dagster instance (docs/testing.md).
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        for var in ("ANIMA_HOME", "DAGSTER_HOME"):
            if os.environ.get(var):
                path = Path(os.environ[var]) / worker
                path.mkdir(parents=True, exist_ok=True)
                os.environ[var] = str(path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The folder's marker on each test; a test outside the known folders is a usage error."""
    for item in items:
        parts = item.path.resolve().relative_to(ROOT).parts
        if parts[0] == "testkit":
            item.add_marker("fakes")
        elif parts[0] == "anima_pipeline_tests" and len(parts) > 2 and parts[1] in FOLDERS:
            item.add_marker(parts[1])
            if parts[1] in PROCESS_FOLDERS:
                item.add_marker("processes")
        else:
            raise pytest.UsageError(
                f"{item.nodeid}: a test belongs in one of anima_pipeline_tests/"
                f"{{{','.join(sorted(FOLDERS))}}}/ or testkit/tests/ (docs/testing.md)"
            )
