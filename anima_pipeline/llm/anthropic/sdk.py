"""The official anthropic SDK, imported on first use.

llm/factory.py imports every engine class, so the Anthropic engine's modules load in any
process that builds an engine; the SDK takes seconds to import, and a process that never
calls the API (the offline engine, an offline service) should not pay for it. The engine and
the batch collector reach the SDK only through `sdk()`; type annotations import it under
TYPE_CHECKING.
"""

from __future__ import annotations

from types import ModuleType


def sdk() -> ModuleType:
    import anthropic

    return anthropic
