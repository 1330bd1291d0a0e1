"""Offline light-sleep heuristics: one day of conversation in, memory candidates out.

These pure functions are the offline engine's stand-in for the three light-sleep
LLM stages (semantic facts, emotional anchors, narrative significance) and the
"message 2" dedup. They are an honest baseline: pattern matching on first-person
statements in English and Chinese, no world knowledge, no coreference beyond the
previous sentence. They never touch the database; the light-sleep step turns
their output into validated tool calls.

This module is the public entry; the work lives in:
light_types (records), light_text (text utilities), small_talk, significance,
emotion (scoring), anchors, rewrite_en (person rewriting), facts_en / facts_zh
(one sentence to a fact), fact_context, facts (the day driver) and dedup.
"""

from __future__ import annotations

from anima_pipeline.night.steps.light.anchors import detect_anchors
from anima_pipeline.night.steps.light.dedup import dedup_against
from anima_pipeline.night.steps.light.facts import extract_facts
from anima_pipeline.night.steps.light.records import AnchorCandidate, Decision, FactCandidate, Utterance
from anima_pipeline.night.steps.light.significance import narrative_significance
from anima_pipeline.night.steps.light.small_talk import is_small_talk
from anima_pipeline.text.dates import resolve_relative_dates
from anima_pipeline.text.words import is_chinese, normalize_key

__all__ = [
    "AnchorCandidate",
    "Decision",
    "FactCandidate",
    "Utterance",
    "dedup_against",
    "detect_anchors",
    "extract_facts",
    "is_chinese",
    "is_small_talk",
    "narrative_significance",
    "normalize_key",
    "resolve_relative_dates",
]
