"""One error hierarchy: `AnimaError`, and one subclass per area.

Every error the package raises on purpose derives from one area below, so the three faces map
errors in one place: the CLI prints the message and exits with `exit_code`, the HTTP service
answers `http_status`, the MCP server returns an error result. An area keeps the builtin base
its errors always had (an `InputError` is still a `ValueError`, a `NightError` still a
`RuntimeError`), so callers that catch the builtin keep working.

Two areas live beside the code that raises them, because they carry that code's data:
the engine area is `llm.errors.EngineError` (the usage a failed step had spent) and the tool
area is `tools.executor.ToolError`; both derive from AnimaError directly.

This module imports nothing of the package: anything may import it (core/steps.py does).
"""

from __future__ import annotations


class AnimaError(Exception):
    """Base of every error the package raises on purpose."""

    exit_code = 1
    http_status = 500


class InputError(AnimaError, ValueError):
    """Bad input from a caller (a file line, a request field, an argument); nothing was written.
    The message names the place."""

    exit_code = 2
    http_status = 422


class ConfigError(AnimaError, ValueError):
    """A setting (environment variable, Dagster storage configuration) that cannot be used."""

    exit_code = 2


class AccessError(AnimaError, PermissionError):
    """A caller reaching for what its key or facade is not bound to."""

    http_status = 403


class StoreError(AnimaError, RuntimeError):
    """The memory database cannot be reached, started or migrated."""

    http_status = 503


class NightError(AnimaError, RuntimeError):
    """The night's orchestration stopped: order, lease, loss guard, size bound, a failed step."""


class ServiceError(AnimaError):
    """An error the HTTP or MCP face answers with its own status and code (service/)."""
