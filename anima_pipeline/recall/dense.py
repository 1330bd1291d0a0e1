"""The question's vector for recall by meaning, made once per context call, or why recall stays
lexical: ANIMA_EMBEDDER=none, a server without pgvector, a model with no vectors stored yet,
an embedder that failed. Recall never fails for want of vectors."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from time import perf_counter

from anima_pipeline.config import Settings
from anima_pipeline.embed.embedder import checked
from anima_pipeline.embed.provider import make_embedder, provider_name
from anima_pipeline.store import vectors
from anima_pipeline.store.db import Connection

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueryVector:
    model_id: str
    dimension: int
    text: str  # pgvector's text form
    seconds: float  # the embedding alone


def query_vector(conn: Connection, settings: Settings, query: str) -> tuple[QueryVector | None, str | None]:
    """(the question's vector, None), or (None, why recall is lexical). A blank question is
    not embedded (its neighbours would be arbitrary). The vector is checked against the
    model's stored dimension (a server whose model changed under the same name answers
    another) and for NaN, infinity and zeros (`embed.embedder.checked`): any of them is an
    embedder failure, never a database error."""
    if not query.strip():
        return None, "empty question"
    if provider_name(settings) == "none":
        return (
            None,
            "ANIMA_EMBEDDER=none"
            if settings.embedder.kind
            else "no embedder installed (ANIMA_EMBEDDER unset)",
        )
    reason = vectors.unavailable_reason(conn)
    if reason:
        return None, reason
    try:
        embedder = make_embedder(settings)
        assert embedder is not None
        model_id = embedder.model_id
        stored = vectors.model_dimension(conn, model_id)
        if not stored:
            return None, f"no vectors stored yet for {model_id} (anima embed)"
        started = perf_counter()
        vec = checked(embedder.embed([query]), 1, stored, model_id)[0]
        seconds = perf_counter() - started
    except Exception as exc:  # noqa: BLE001 - any embedder failure: lexical recall, said so
        log.warning("recall by meaning unavailable: %s: %s", type(exc).__name__, exc)
        return None, f"embedder failed: {type(exc).__name__}: {exc}"
    return QueryVector(model_id, len(vec), vectors.to_text(vec), seconds), None


def recall_status(conn: Connection, settings: Settings, anima_id: str | None = None) -> dict:
    """How recall runs here, for `anima status` and the facade: mode (hybrid | lexical), provider,
    model, dimension, the items waiting for a vector, and why recall is lexical when it is."""
    out: dict = {"mode": "lexical", "provider": provider_name(settings), "model": None, "dimension": None}
    out |= {"backlog": None, "lexical_reason": None}
    if out["provider"] == "none":
        out["lexical_reason"] = "ANIMA_EMBEDDER=none" if settings.embedder.kind else "no embedder installed"
        return out
    reason = vectors.unavailable_reason(conn)
    if reason:
        out["lexical_reason"] = reason
        return out
    try:
        embedder = make_embedder(settings)
        assert embedder is not None
        out |= {"model": embedder.model_id, "dimension": embedder.dimension}
    except Exception as exc:  # noqa: BLE001 - status reports, never fails
        out["lexical_reason"] = f"embedder failed: {type(exc).__name__}: {exc}"
        return out
    out["backlog"] = vectors.backlog(conn, embedder.model_id, anima_id)
    if vectors.model_dimension(conn, embedder.model_id):
        out["mode"] = "hybrid"
    else:
        out["lexical_reason"] = f"no vectors stored yet for {embedder.model_id} (anima embed)"
    return out
