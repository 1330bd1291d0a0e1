"""What a step folder declares to the registry: the key, group, description and dependencies
of each of its steps, the function the night runs, which animas it processes, and what its
Dagster materialization shows (the audit-log counts, the table it writes, its Markdown
preview; preview.py). night/registry.py assembles the table from the folders in STEP_ORDER.

A step's default model role is not declared here but in core/steps.py (SMALL_MODEL_STEPS):
the settings and the engines, below the night, read it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, TypeAlias

from anima_pipeline.core.steps import StepKey

if TYPE_CHECKING:
    from anima_pipeline.night.frame import Night, StepResult
    from anima_pipeline.store.db import Connection, Database

    StepFn: TypeAlias = Callable[[Database, Night, str], StepResult]
    AnimasFn: TypeAlias = Callable[[Connection, Night], list[str]]
    Preview: TypeAlias = Callable[[Connection, date, str, Sequence[str]], str]

# {metadata key: (table, op)} of the audit log (memory_event): what a step's materialization
# counts, the same keys on every partition; the first table is the one the step writes.
Changes: TypeAlias = dict[str, tuple[str, str]]


def changes(table: str, **ops: str) -> Changes:
    """{metadata key: (table, op)} for the ops of one table, written as key=op."""
    return {key: (table, op) for key, op in ops.items()}


@dataclass
class StepDef:
    key: StepKey  # the Dagster asset key path, also sleep_state.step and memory_event.step
    group: str
    description: str
    run: StepFn
    deps: tuple[StepKey, ...]
    changes: Changes
    # which animas the step processes on a day; None = those with conversations that day
    animas: AnimasFn | None = None
    preview: Preview | None = None  # Markdown of what it wrote, by id, size and count
    sends_request: bool = True  # False: no model request, nothing to measure as input_chars
    # sends nothing for an anima whose store did not change that day (docs/cost.md); its
    # materialization says how many animas it skipped so
    skips_unchanged: bool = False

    @property
    def table(self) -> str:
        """The table the step writes (its dagster/row_count)."""
        return next(iter(self.changes.values()))[0]

    @property
    def module(self) -> str:
        """The step's module under anima_pipeline (for display: Dagster metadata)."""
        return self.run.__module__.removeprefix("anima_pipeline.")

    @property
    def fn(self) -> str:
        return self.run.__name__
