"""What a failure of the database driver means for a caller, in the store area's errors.

The faces (the HTTP service, the CLI) answer a psycopg or pool failure as they answer any
error of the package, by its `http_status` / `exit_code` (core/errors.py): a server that
cannot be reached is a `StoreError` (503, store_unavailable), a statement it refused a
`StoreRefused` (500, store_error). Only this module knows the driver's classes.
"""

from __future__ import annotations

import psycopg
from psycopg_pool import PoolTimeout

from anima_pipeline.core.errors import StoreError, StoreRefused


def store_failure(exc: BaseException) -> StoreError | None:
    """`exc` as a store error, or None when it is not the driver's. The message of a lost
    server keeps libpq's words (host, port, database; never a password: libpq does not print
    one); any other driver error is named by its class only, as its text may quote the URL."""
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, PoolTimeout):  # an OperationalError whose text names the pool
        return StoreError(
            f"cannot reach the store (no connection within the pool's timeout: {type(exc).__name__})"
        )
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return StoreError(str(exc).strip() or f"cannot reach the store ({type(exc).__name__})")
    if isinstance(exc, psycopg.Error):
        return StoreRefused(f"the store refused a statement ({type(exc).__name__}); nothing was written")
    return None
