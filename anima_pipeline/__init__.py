"""anima_pipeline: nightly sleep-style memory consolidation for long-lived LLM agents."""

__version__ = "0.1.0"
