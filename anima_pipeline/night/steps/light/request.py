"""A light-sleep stage sent to an engine, without the frame (no Night, no step runner): the day
family's shared prefix (night/prefix.py) or the stage's own tools and framing, the request
(light/prompt.py), the engine's run over the executor. The night's stages (light/step.py) and
the agent's pre-compaction flush (memory/flush.py, stage 1 over a slice of one conversation)
both send it through `run_stage`, so the chat-time side never imports the night's frame.
"""

from __future__ import annotations

from datetime import date
from zoneinfo import ZoneInfo

from anima_pipeline.llm.contract import Engine, OfflinePlan, StepRequest, Usage
from anima_pipeline.night.prefix import DAY_FAMILY, day_prefix, read_follows
from anima_pipeline.night.steps.light.prompt import PROMPTS, stage_request
from anima_pipeline.tools.executor import ToolExecutor


def run_stage(
    step: str,
    engine: Engine,
    day: date,
    tz: ZoneInfo,
    executor: ToolExecutor,
    identity: str,
    inputs: list[str],
    plan: OfflinePlan,
    *,
    must_write: bool = False,
) -> tuple[StepRequest, Usage]:
    """The stage's request over the tools of the executor's scope, run by `engine` (the model
    chooses the tool calls; the offline engine makes those of `plan`). The stages whose message
    1 is the day's transcript send the day family's prefix (night/prefix.py): on one model, the
    union of their tools and framings, so the later ones read it from the cache."""
    shared = (
        day_prefix(engine, step, executor.scope.tools)
        if step in DAY_FAMILY
        else (executor.scope.tools, PROMPTS[step][0], read_follows((step,)))
    )
    request = stage_request(step, day, tz, identity, inputs, shared, must_write=must_write)
    return request, engine.run(request, executor, plan)
