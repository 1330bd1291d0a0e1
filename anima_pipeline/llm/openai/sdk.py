"""The official openai SDK, imported on first use.

llm/factory.py imports every engine class, so this engine's modules load in any process that
builds an engine; a process that never calls an OpenAI-compatible server (the offline engine,
the Anthropic one) should not pay for the SDK's import. The engine reaches it only through
`sdk()`; type annotations import it under TYPE_CHECKING (as llm/anthropic/sdk.py does).
"""

from __future__ import annotations

from types import ModuleType


def sdk() -> ModuleType:
    import openai

    return openai
