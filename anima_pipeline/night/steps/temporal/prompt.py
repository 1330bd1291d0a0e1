"""What the temporal summaries tell the model: the framing, the day's task and the cascade's,
and the request one summary sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anima_pipeline.llm.contract import StepRequest, TextBlock
from anima_pipeline.night.steps.framing import system_blocks
from anima_pipeline.tools.schemas import tool_specs

if TYPE_CHECKING:
    from anima_pipeline.night.frame import Night

TEMPORAL_SYSTEM = """\
You write the temporal summaries of a digital life: a day summary from the day's
conversations and memory changes, and week, month and year summaries from the level below.
A summary is concrete (names, places, absolute dates) and short."""

TEMPORAL_DAY = """\
Write the summary of today: what happened in the conversations (message 1) and what changed
in memory (message 2), in a few short paragraphs or bullets, at most about 1,500 characters.
Call write_temporal_summary once with the level and period given above."""

TEMPORAL_CASCADE = """\
Write the {level} summary from the summaries of the level below (message 1): the main threads,
milestones and changes of the period, shorter than the sum of its parts (at most about 2,000
characters). Call write_temporal_summary once with the level and period given above."""


def summary_request(
    step: str, night: Night, identity: str, user: list[str], shared: tuple[tuple[str, ...], str, bool]
) -> StepRequest:
    """One summary's request: `shared` (the tools, framing and whether a later request reads it, of the prefix it sends; the day
    summary's is the day family's, night/prefix.py) and the identity as the system prompt, the
    user messages after it, message 1 with a cache breakpoint. It must write: the summary is a
    row the product needs (recall, the cascade)."""
    tools, framing, cached = shared
    return StepRequest(
        step=step,
        system=system_blocks(framing, night.day, night.tz, identity, cache=cached),
        user=[TextBlock(text=t, cache=cached and i == 0) for i, t in enumerate(user)],
        tools=tool_specs(tools),
        must_write=True,
        one_answer=True,  # its one write ends it (the task says: call it once)
    )
