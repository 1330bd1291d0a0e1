"""Engines: the contract a step and its engine share, the offline engine, the Anthropic
engine (anthropic/), the OpenAI-compatible engine (openai/), the tool loop and the retry layer
they share, prices, budgets and rate limits."""
