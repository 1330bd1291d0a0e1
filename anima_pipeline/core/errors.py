"""One error hierarchy: `AnimaError`, and one subclass per area.

Every error the package raises on purpose derives from one area below, and carries what each
face needs to answer it without knowing its class:

- `code`: a stable snake_case word for programs (`invalid_request`, `not_found`, …);
- `http_status`: what the HTTP service answers (service/http/error_handlers.py, one handler);
- `exit_code`: what the CLI exits with (cli/app.py, one handler), after one line on stderr,
  `label: message`;
- `field`: the input at fault, when there is one (``messages[3].created_at``);
- `remote_message`: the words a remote caller reads instead of the message, when the message
  may hold what only the operator should see (a server's address in a store error).

The MCP server returns the message as a tool error. An area keeps the builtin base its errors
always had (an `InputError` is still a `ValueError`, a `NightError` still a `RuntimeError`),
so callers that catch the builtin keep working, and a pydantic validator may raise one.

Three areas live beside the code that raises them, because they carry that code's data: the
engine's `EngineError` (llm/: the usage a failed step had spent), the tools' `ToolError`
(tools/) and the embedder's `EmbedderError` (embed/); each derives from AnimaError directly.

This module imports nothing of the package: anything may import it (core/steps.py does).
"""

from __future__ import annotations

from datetime import datetime


class AnimaError(Exception):
    """Base of every error the package raises on purpose."""

    code = "internal_error"
    http_status = 500
    exit_code = 1
    label = "error"
    remote_message: str | None = None
    field: str | None = None


class InternalError(AnimaError, ValueError):
    """A contract broken inside the package (a table name outside its list, a read-only
    repository asked to write): a bug, whoever called. A ValueError, as these guards were."""


class InputError(AnimaError, ValueError):
    """Bad input from a caller (a file line, a request field, an argument); nothing was written.
    The message names the place: `field` (``messages[3].created_at``) when it is one field,
    `message_id` the message when there is one; `detail` is the reason without the field."""

    code = "invalid_request"
    http_status = 422
    exit_code = 2

    def __init__(self, detail: str, *, field: str | None = None, message_id: str | None = None) -> None:
        super().__init__(f"{field}: {detail}" if field else detail)
        self.detail = detail
        self.field = field
        self.message_id = message_id


class NotFound(InputError, LookupError):
    """An id this anima does not have: never had, erased by a purge (`erased_at`), or hidden
    by a soft forget (`forgotten_at`: out of every read until the forget is reverted)."""

    code = "not_found"
    http_status = 404

    def __init__(
        self,
        what: str,
        ref: str,
        erased_at: datetime | None = None,
        *,
        field: str | None = None,
        forgotten_at: datetime | None = None,
    ) -> None:
        if erased_at:
            when = f" was erased (forget --purge) at {erased_at:%Y-%m-%d %H:%M:%S %Z}"
        elif forgotten_at:
            when = f" was forgotten at {forgotten_at:%Y-%m-%d %H:%M:%S %Z}"
        else:
            when = " does not exist"
        super().__init__(f"{what} {ref}{when}")
        self.field = field  # reported apart: the message names the id already
        self.ref, self.erased_at = ref, erased_at


class Conflict(InputError):
    """Input that contradicts what is stored or decided (a re-sent message with other text, a
    proposal decided before); nothing was written. The message gives the way out."""

    code = "conflict"
    http_status = 409


class ConfigError(AnimaError, ValueError):
    """A setting (environment variable, Dagster storage configuration) that cannot be used."""

    code = "config_error"
    exit_code = 2
    label = "configuration error"


class AccessError(AnimaError, PermissionError):
    """A caller reaching for what its key or facade is not bound to."""

    code = "forbidden"
    http_status = 403
    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class Unauthorized(AccessError):
    """A request without a live key (missing, unknown or revoked)."""

    code = "unauthorized"
    http_status = 401


class StoreError(AnimaError, RuntimeError):
    """The memory database cannot be reached, started or migrated."""

    code = "store_unavailable"
    http_status = 503
    label = "store error"
    remote_message = "the store could not be reached; nothing was written: retry"


class StoreRefused(StoreError):
    """The store refused a statement (a constraint, a trigger): the transaction was rolled back."""

    code = "store_error"
    http_status = 500
    remote_message = "the store refused the request; nothing was written"


class NightError(AnimaError, RuntimeError):
    """The night's orchestration stopped: order, lease, loss guard, size bound, a failed step."""

    code = "night_failed"


class ServiceError(AnimaError):
    """A request the HTTP face refuses before any operation runs: a route or method it does
    not have, a body over its size limit (service/http/)."""

    code = "service_error"

    def __init__(self, message: str, *, status: int, code: str) -> None:
        super().__init__(message)
        self.http_status, self.code = status, code
