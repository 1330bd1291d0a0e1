"""Embedders: texts in, unit vectors out (none, local numpy encoder, OpenAI-compatible HTTP)."""
