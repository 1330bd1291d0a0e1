"""Engines: the contract a step and its engine share, the offline engine, the Anthropic
engine (anthropic/), prices, budgets and rate limits."""
