"""The tool the temporal summaries offer the model, and the step's own rule on it: one
write_temporal_summary for the one (level, period) being written. The tool model is in
tools/schemas.py: the one contract the executor applies for every engine and every door.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from anima_pipeline.llm.contract import ToolResult

if TYPE_CHECKING:
    from anima_pipeline.tools.executor import ToolExecutor

TOOLS = ("write_temporal_summary",)


class PeriodGuard:
    """The executor, restricted to one (level, period): the scope limits levels, and this
    keeps a model from overwriting another day's or week's summary by a wrong date."""

    def __init__(self, executor: ToolExecutor, level: str, start: date, end: date) -> None:
        self.executor, self.level, self.start, self.end = executor, level, start.isoformat(), end.isoformat()

    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        if name == "write_temporal_summary" and isinstance(input, dict):
            got = (input.get("level"), str(input.get("period_start")), str(input.get("period_end")))
            if got != (self.level, self.start, self.end):
                return ToolResult(
                    is_error=True,
                    content=f"this step writes level {self.level!r} for period_start {self.start}, "
                    f"period_end {self.end}; got {got[0]!r} {got[1]}–{got[2]}",
                )
        return self.executor.call(name, input)

    def declined(self, said: str) -> None:
        self.executor.declined(said)
