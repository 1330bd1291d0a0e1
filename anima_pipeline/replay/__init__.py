"""Replay (docs/replay.md): shadow stores as of a day, past nights again into them, the diff,
and an audited promote."""
