"""The offline engine: runs a step's heuristic plan instead of asking a model.

This is an honest heuristic baseline (the planners live in anima_pipeline/offline/), not a
simulation of an LLM: it makes exactly the calls the step's `offline_plan` yields, feeding
each result back so a later call can use an id created by an earlier one. It is deterministic, needs no network or key, and costs
nothing, which makes it the default engine and the reference the LLM engine is compared
against. Calls still go through the same `ToolRunner`, so validation and audit apply.
"""

from __future__ import annotations

from anima_pipeline.llm.contract import OfflinePlan, StepRequest, ToolRunner, Usage


class OfflineEngine:
    name = "offline"

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage:
        gen = offline_plan()
        try:
            call = next(gen)
            while True:
                result = runner.call(call.name, call.input)
                call = gen.send(result)
        except StopIteration:
            pass
        finally:
            # A runner error leaves the plan suspended; close it so its cleanup runs now.
            gen.close()
        return Usage()

    def __repr__(self) -> str:
        return "OfflineEngine()"
