"""The offline engine: deterministic heuristics that plan each sleep step's tool calls
without a model (llm/offline.py runs the plans through the same validated tool executor).

Per step, a planner over the same inputs the step gives the LLM:
    light_plans   light sleep: semantic facts, emotional anchors, narratives, autobiography outline
    deep_plans    deep sleep: contradictions and expiries, splits, merges, stale pins
    temporal      day summaries and the week / month / year cascade (extractive)
    dream         the dream journal entry
    self_blocks   persona, values, relationships, current_state

The rules they use: light (facade) over facts / facts_en / facts_zh (one sentence to a
fact, per language), rewrite_en, attributes (over attributes_en / attributes_zh, the
patterns per language), anchors, emotion, significance, small_talk,
dedup, dates; deep (deep-sleep decisions), similarity; entities (names, content words,
plans). Shared vocabularies (months, weekdays, number words, irregular verbs, stop words)
are in vocab, cue patterns in lexicon. Nothing here touches the database or Dagster.
"""
