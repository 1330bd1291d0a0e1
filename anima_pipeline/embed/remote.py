"""The HTTP provider: an OpenAI-compatible ``POST /v1/embeddings`` server (Ollama, vLLM, TEI,
OpenAI…). Texts go in batches of `batch`; a timeout, a connection error, a 429 or a 5xx is
retried with exponential backoff (tenacity) up to `retries` times; a 4xx other than 429 is
not (the request itself is wrong). The dimension is the first answer's; every answer is
checked (`embedder.checked`: one vector per text, finite, that dimension, not zero).

httpx, tenacity and numpy load when an embedder is built or runs, not when embed/provider.py
imports this module (every `anima recall`; test_cli_startup)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from anima_pipeline.embed.embedder import EmbedderError, checked

if TYPE_CHECKING:
    import numpy as np


def _retryable(exc: BaseException) -> bool:
    import httpx2 as httpx

    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code == 429 or exc.response.status_code >= 500
    return isinstance(exc, httpx.TransportError)


class HttpEmbedder:
    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        batch: int = 64,
        timeout_s: float = 30.0,
        retries: int = 3,
    ) -> None:
        import httpx2 as httpx
        from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/embeddings") else base.removesuffix("/v1") + "/v1/embeddings"
        self.model, self.batch = model, batch
        self.model_id = f"http:{model}"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(timeout=timeout_s, headers=headers)
        self._post = retry(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(retries + 1),
            wait=wait_exponential(multiplier=0.2, max=5),
            reraise=True,
        )(self._post_once)
        self._dimension: int | None = None

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension probe"])
        assert self._dimension is not None
        return self._dimension

    def _post_once(self, texts: list[str]) -> list[list[float]]:
        r = self.client.post(self.endpoint, json={"model": self.model, "input": texts})
        r.raise_for_status()
        data = sorted(r.json()["data"], key=lambda d: d["index"])
        return [d["embedding"] for d in data]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import httpx2 as httpx
        import numpy as np

        parts: list[np.ndarray] = []
        for s in range(0, len(texts), self.batch):
            chunk = list(texts[s : s + self.batch])
            try:
                got = self._post(chunk)
            except (httpx.HTTPError, KeyError, ValueError, TypeError) as exc:
                raise EmbedderError(f"{self.endpoint} (model {self.model!r}): {exc}") from exc
            part = checked(got, len(chunk), self._dimension, f"{self.endpoint} (model {self.model!r})")
            self._dimension = part.shape[1]
            parts.append(part)
        if not parts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        return np.concatenate(parts)
