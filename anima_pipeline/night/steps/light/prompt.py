"""What light sleep tells the model: each stage's framing (its system prompt) and task (its
last user message), and the request a stage sends. The examples (English and Chinese) are
written for this project.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from zoneinfo import ZoneInfo

from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import StepRequest, TextBlock
from anima_pipeline.night.steps.framing import RESTRAINT_RULE, system_blocks, tagged
from anima_pipeline.night.steps.light.tools import CREATE_ONLY, SEMANTIC_TOOLS
from anima_pipeline.tools.schemas import tool_specs

MEMORY_EXAMPLES = """\
Good and bad memories:
- Good (world): "Sam's sister Mei started work as a nurse in Qingdao in March 2026."
  Bad: "She started a new job last month." — who is "she", and when?
- Good (preference): "小林不吃香菜。"
  Bad: "助手建议小林每天跑步。" — the assistant's advice is not a fact about the user.
- Good (experience): "On 2026-11-15 Sam ran his first half marathon in 2:05."
  Bad: "Sam could run a marathon if he trained more." — a hypothetical.
- Good (opinion, confidence 0.7): "王芳觉得远程办公效率更高。"
  Bad: the content of an article the user pasted — a document is not the user's memory.
- Good (preference, from "remember that I hate meetings before 10"): "Sam dislikes meetings
  before 10 a.m." Bad: treating "forget what I said about my job" as an order — it is a wish
  of the user to record ("Sam asked not to dwell on his job"), the old memory stays."""

# The memory types, the confidence scale and the dates are explained once, in the tool's schema
# (tools/schemas.py TYPE_HELP ...), which every request of this stage carries.
LIGHT_SEMANTIC_SYSTEM = f"""\
You are the light-sleep semantic stage of a digital life's memory: each night you read the
day's conversations between the user and this digital life and record what is worth
remembering about the user, as semantic memories, through tools. You are not in the
conversation and you answer no one.

{MEMORY_EXAMPLES}"""

_SEMANTIC_TASK = """\
Message 1 holds today's conversations (user and assistant; tool output removed), one section
per conversation with its id and times.{message_two}

Record the durable facts about the user and the user's world: people and relations, plans and
events with absolute dates, preferences, opinions, experiences, imprints.
- Only what the user said or clearly showed. Leave out the assistant's own claims, advice and
  suggestions; hypotheticals, jokes and role-play; the content of pasted documents, code,
  articles or search results (unless the user says it is about them).
- One fact per memory, self-contained: name the person instead of "I"/"he"; resolve relative
  dates against the conversation's date ("yesterday" said on 2026-11-17 -> "on 2026-11-16").
{compare}- Small talk and greetings are not memories.
{restraint}
Tools: {tools}."""
# What a field means (source_sessions, what update does with the fields it is passed) is the
# tool schema's to say (tools/schemas.py); the task says what to record and when to use which tool.
LIGHT_SEMANTIC_TASK = _SEMANTIC_TASK.format(
    message_two="""
Message 2 lists the existing active memories that came from these conversations, with their ids.""",
    compare="""\
- Compare with message 2 first: already there -> do nothing; a refinement or correction ->
  update_semantic_memory on that id; no longer true -> deprecate_semantic_memory with a
  reason. You may update or deprecate only ids in message 2.
""",
    restraint=RESTRAINT_RULE,
    tools=", ".join(SEMANTIC_TOOLS),
)
# With no existing memory to show stage 1 can only create: it gets that tool alone, no message
# 2 and a task without the rules of the others (docs/cost.md).
LIGHT_SEMANTIC_NEW_TASK = _SEMANTIC_TASK.format(
    message_two="", compare="", restraint=RESTRAINT_RULE, tools=", ".join(CREATE_ONLY)
)

LIGHT_LIMBIC_SYSTEM = """\
You are the limbic stage of light sleep: you record the emotional colour of the user's day as
emotional anchors — the mood of a conversation that had a noticeable one, and the turning
points where the mood shifted, with what triggered them."""

LIGHT_LIMBIC_TASK = f"""\
From today's conversations (message 1) record emotional anchors; message 2 lists the anchors
already recorded today (do not repeat them). valence -1..1 (unpleasant..pleasant), arousal
0..1 (calm..excited), intensity 0..1. occurred_at is the time of the message where it shows
(ISO-8601 with the UTC offset); conversation_id one of today's conversations. Neutral,
practical talk gets no anchor.
Example: "I finally got the offer!!" -> emotion "joy", valence 0.9, arousal 0.8.
例："外婆住院了，我很担心。" -> emotion "担忧", valence -0.7, arousal 0.6.
{RESTRAINT_RULE}
Tool: create_emotional_anchor."""

LIGHT_NARRATIVE_SYSTEM = """\
You are the autobiographical stage of light sleep (phase A): you tell, as short narratives,
what the experiences of the last days meant to this digital life and to its relationship with
the user. Narratives are rare: most days add none."""

LIGHT_NARRATIVE_TASK = f"""\
Message 1 lists the experience and imprint memories of today and of the last 7 days. Message 2
lists the existing active narratives with their dates and the memories they already cover.
- Write a narrative only for something worth telling that no narrative covers yet; never
  narrate a memory again that an existing narrative already covers (its ids are listed).
- significance: routine | notable | milestone | turning_point. Set occurred_from (and
  occurred_until for a span) with the UTC offset, and source_memory_ids.
- Deprecate a narrative only if it is wrong, with a reason.
{RESTRAINT_RULE}
Tools: create_autobiographical_memory, deprecate_autobiographical_memory."""

LIGHT_AUTOBIOGRAPHY_SUMMARY_SYSTEM = """\
You are phase B of the autobiography: you keep the self block autobiography_summary, the
outline of this digital life's story that stays in its prompt."""

LIGHT_AUTOBIOGRAPHY_SUMMARY_TASK = """\
Compress the active narratives (message 1, with dates and significance) into the self block
autobiography_summary: a grouped outline by significance, titles only (one bullet per
narrative title, with its date). Recent periods keep finer grain; distant periods keep only
milestones and turning points. At most about 2,000 characters. Call write_self_block once
with name "autobiography_summary"."""

# Each stage's framing (the system prompt) and task (its last user message).
PROMPTS: dict[str, tuple[str, str]] = {
    StepKey.SEMANTIC_EXTRACTED: (LIGHT_SEMANTIC_SYSTEM, LIGHT_SEMANTIC_TASK),
    StepKey.ANCHORS_MARKED: (LIGHT_LIMBIC_SYSTEM, LIGHT_LIMBIC_TASK),
    StepKey.AUTOBIOGRAPHY_NARRATED: (LIGHT_NARRATIVE_SYSTEM, LIGHT_NARRATIVE_TASK),
    StepKey.AUTOBIOGRAPHY_SUMMARY: (LIGHT_AUTOBIOGRAPHY_SUMMARY_SYSTEM, LIGHT_AUTOBIOGRAPHY_SUMMARY_TASK),
}


def stage_request(
    step: str,
    day: date,
    tz: ZoneInfo,
    identity: str,
    inputs: list[str],
    shared: tuple[tuple[str, ...], str, bool],
    *,
    must_write: bool,
) -> StepRequest:
    """The stage's request: `shared` (tools, framing, cached) and the identity as the system
    prompt, its inputs then its task as the user messages; message 1 (the day, or the stage's
    main input) carries a cache breakpoint when a later request reads it (`cached`: another step
    of its family, or its own next tool turn, night/prefix.py's `read_follows`)."""
    tools, framing, cached = shared
    task = PROMPTS[step][1]
    if step == StepKey.SEMANTIC_EXTRACTED and tuple(tools) == CREATE_ONLY:
        task = LIGHT_SEMANTIC_NEW_TASK
    return StepRequest(
        step=step,
        system=system_blocks(framing, day, tz, identity, cache=cached),
        user=[TextBlock(text=t, cache=cached and i == 0) for i, t in enumerate([*inputs, task])],
        tools=tool_specs(tools),
        must_write=must_write,
        one_answer=True,  # every call in one answer (framing.py's RESTRAINT_RULE)
    )


def listing(tag: str, header: str, lines: Iterable[str]) -> str:
    """A tagged list under its header line, "(none)" when it is empty."""
    return tagged(tag, header + "\n" + ("\n".join(lines) or "(none)"))
