"""The Anthropic engine: the Messages API tool-use loop (engine.py) and Message Batches
(batches.py), through the official SDK."""
