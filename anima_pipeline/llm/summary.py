"""The session summary written by the engine's model (the `summarizer` of every engine with a
model: Anthropic, an OpenAI-compatible server).

Its instructions and the anima's identity context are a cached prefix, the same every cycle
of every session of the anima; then come the summary so far and only the turns that leave
the view, so the model sees each turn once (recall/session_view.py). It is one plain answer
(`Engine.complete`): the engine's retries, budget and accounting apply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Protocol
from zoneinfo import ZoneInfo

from anima_pipeline.llm.contract import TextBlock, Usage
from anima_pipeline.store.session_rows import Turn
from anima_pipeline.text.slim import slim


class Answers(Protocol):
    """An engine that answers in text (llm/contract.py's `Engine.complete`)."""

    name: ClassVar[str]

    def complete(
        self,
        step: str,
        system: str | list[TextBlock],
        prompt: str | list[TextBlock],
        *,
        max_tokens: int = 1024,
    ) -> tuple[str, Usage]: ...


SUMMARY_STEP = "agent/session_summary"
SUMMARY_SYSTEM = """\
You keep the running summary of one conversation between a user and a digital life, so the
conversation can go on after its older turns leave the context window. You are not in the
conversation and you answer no one.

Write the summary as short lines "- [MM-DD HH:MM] who: what", in the order things happened:
who said or decided what, facts about the user and their world, plans with absolute dates,
open questions and promises. Keep every [[anima:f-N]] marker that a kept line relies on.
Keep the summary so far as it is (shorten its least important lines only when the whole
would exceed the limit) and append what the new turns add. Answer with the summary only."""


class ModelSummarizer:
    """The summary so far extended by the model, within the characters `fits` allows; `name`
    (stored with each summary) is the engine's."""

    def __init__(self, engine: Answers, identity: str, tz: ZoneInfo) -> None:
        self.engine, self.identity, self.tz = engine, identity, tz
        self.name = engine.name

    def extend(self, previous: str, turns: Sequence[Turn], fits: Callable[[str], bool]) -> str:
        said = "\n".join(
            f"[{t.created_at.astimezone(self.tz):%m-%d %H:%M}] {t.speaker or t.role}: {slim(t, 2000)[0]}"
            for t in turns
        )
        limit = 4000.0
        while limit > 200 and not fits("x" * int(limit)):
            limit *= 0.8
        prompt = [
            TextBlock(text="<summary_so_far>\n" + (previous or "(none yet)") + "\n</summary_so_far>"),
            TextBlock(text="<new_turns>\n" + said + "\n</new_turns>"),
            TextBlock(
                text=f"Write the summary so far extended with the new turns, at most {int(limit)} characters."
            ),
        ]
        system = [TextBlock(text=SUMMARY_SYSTEM), TextBlock(text=self.identity, cache=True)]
        text, _ = self.engine.complete(SUMMARY_STEP, system, prompt, max_tokens=2048)
        while text and not fits(text):  # the model overshot: drop its last lines
            text = text.rsplit("\n", 1)[0] if "\n" in text else text[: len(text) * 4 // 5]
        return text.strip()
