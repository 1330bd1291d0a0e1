"""Conversation cleanup, the first step of the night."""
