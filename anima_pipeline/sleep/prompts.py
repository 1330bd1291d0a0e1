"""The instructions each step gives the LLM (message 3 of the seeds), as named constants.

Kept apart from the step code so prompts can be read, reviewed and versioned as text.
The identity context is always the system prompt; these are the user-side instructions.
"""

LIGHT_SEMANTIC = """\
You are the light-sleep semantic stage of a digital life's memory. Message 1 holds today's
conversations (user and assistant; tools removed), one section per conversation with its id.
Message 2 lists the existing active memories that came from these conversations, with their ids.

Extract durable facts worth remembering: facts about people (the user above all), preferences,
plans, experiences and events with their dates, named people, pets and places, opinions, and
imprints (moments that shape identity). Rules:
- One fact per memory, self-contained: name the person instead of "I"/"he"; keep the language
  it was said in.
- Resolve relative dates against the conversation's date and write absolute dates
  ("yesterday" said on 2023-05-08 -> "on 2023-05-07"; "last year" -> "in 2022").
- Before creating, compare with message 2: if the fact is already there, do nothing; if it
  refines or corrects an entry, call update_semantic_memory on that id (only the fields you
  pass change; source_sessions: [] clears sources); if an entry is now wrong, deprecate it.
- You may update or deprecate only ids shown in message 2. source_sessions may name only
  today's conversations; omit it to cite the conversations of this input.
- Restraint: small talk and greetings are not memories. If nothing is worth recording, call
  no tool and reply "nothing to record".
Tools: create_semantic_memory, update_semantic_memory, deprecate_semantic_memory.
"""

LIGHT_LIMBIC = """\
You are the limbic stage of light sleep. From today's conversations (message 1), record the
emotional anchors: the mood of each conversation that had a noticeable one, and the turning
points where the mood shifted (what triggered it). Valence is -1..1, arousal 0..1, intensity
0..1. Neutral, practical talk gets no anchor; recording nothing is a normal result.
Tool: create_emotional_anchor (conversation_id must be one of today's conversations).
"""

LIGHT_NARRATIVE = """\
You are the autobiographical stage (phase A). Message 1 lists the experience and imprint
memories of today and of the last 7 days; message 2 the existing active narratives. Write a
narrative only when something is worth telling: what an experience meant to this digital life
and to its relationship with the user. Significance: routine, notable, milestone or
turning_point. Do not repeat an existing narrative; deprecate one only if it is wrong.
Restraint: zero narratives is a normal, successful result — then call no tool.
Tools: create_autobiographical_memory, deprecate_autobiographical_memory.
"""

LIGHT_AUTOBIOGRAPHY_SUMMARY = """\
You are phase B of the autobiography: compress the active narratives (message 1) into the
self block autobiography_summary. Write a grouped outline by significance, titles only (one
bullet per narrative title, with its date). Recent periods keep finer grain; distant periods
keep only milestones and turning points. Call write_self_block once with name
"autobiography_summary".
"""

DEEP_SYSTEM_NOTE = """\
Message 1 is the full list of active semantic memories (compact JSON, identical in every
round). Message 1.5 lists the changes of earlier rounds: it overrides message 1. Message 2 is
a program pre-filter: the candidates to look at first. Message 3 is this round's task.
"""

DEEP_CONTRADICTION = """\
Round 1: contradiction and expiry. A contradiction is exclusive: two memories negate each other
and the difference cannot be explained by change over time ("daughter born in the Year of the
Tiger" vs "... Year of the Goat"; "likes spicy food" vs "does not like spicy food"). Coexisting
preferences are not contradictions ("likes apples" / "likes cherries"), and a change over time
is not one ("likes Python" / "now prefers TypeScript") — but the older fact has then expired.
Deprecate the loser with a reason; pass superseded_by when a newer memory replaces it.
Tool: deprecate_semantic_memory. If nothing applies, call no tool.
"""

DEEP_SPLIT = """\
Round 2: split. An entry that holds several independent facts becomes one memory per fact
(each self-contained: repeat the subject). Sentences that depend on each other stay together.
Tool: split_semantic_memory (sources and observed_at are inherited; the original is
deprecated). If nothing applies, call no tool.
"""

DEEP_MERGE = """\
Round 3: merge duplicates and near-duplicates (the same fact in other words) into one memory
with the fullest content. The program stitches the fields (sources union, earliest
observed_at). Tool: merge_semantic_memories with two or more ids. Do not merge facts that
merely share a topic. If nothing applies, call no tool.
"""

DEEP_PINS = """\
Round 4: pin review. Pinned memories stay in the agent's context always (at most 40 are read).
Unpin pins that are stale (not cited for a long time, no longer true or no longer important)
with a reason; pin a memory only if it is essential to who the user is. Tools:
unpin_semantic_memory, pin_semantic_memory. If nothing applies, call no tool.
"""

TEMPORAL_DAY = """\
Write the day summary of this anima's day: what happened in the conversations (message 1) and
what changed in memory (message 2), in a few short paragraphs or bullets, concrete (names,
places, dates). Call write_temporal_summary once with level "day".
"""

TEMPORAL_CASCADE = """\
Write the {level} summary from the summaries of the level below (message 1): the main threads,
milestones and changes of the period, shorter than the sum of its parts. Call
write_temporal_summary once with level "{level}".
"""

DREAM = """\
You simulate REM dream-sleep creative synthesis for this digital life. From today's memories
(message 1) and the long-term store (message 2): find non-obvious cross-domain connections,
update confidence values where evidence has shifted (only ids shown), generate concrete
next-session actions, and propose bank pages (entity or concept) for topics that recurred.
Call write_dream_entry once.
"""

SELF_REFRESH = """\
Refresh the self layer from today's consolidated memories (message 1) and the current blocks
(in the system prompt). Rewrite only the blocks that the day changed: persona, values,
relationships, current_state. Keep them short and factual; never write identity.
Tool: write_self_block.
"""
