"""The HTTP service of `anima serve` (FastAPI): the agent API under /v1 and review mode."""
