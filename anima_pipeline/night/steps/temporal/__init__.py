"""Temporal summaries: the day summary and the week / month / year cascade."""
