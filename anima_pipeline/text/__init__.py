"""The language rules the offline engine shares (English and Chinese): vocabularies, cue
lexicon, dates, entities, sentences, similarity, attribute patterns. Pure functions: no
database, no Dagster, nothing of the package above `core/` (docs/architecture.md)."""
