"""The chat-time side: the resident set, the identity context, recall sections and active search,
the current session's view and the working context of a turn (docs/architecture.md)."""
