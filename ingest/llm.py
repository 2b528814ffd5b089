"""The client of any OpenAI-compatible chat-completions endpoint (hosted APIs, vLLM, llama.cpp, Ollama).

``POST {PAPERTRAIL_LLM_URL}/chat/completions`` with the model, the messages, a low temperature and a token
cap; a bearer token when ``PAPERTRAIL_LLM_API_KEY`` is set. Time-outs, network errors, 429 (honouring
Retry-After up to a cap) and 5xx are retried with back-off a few times. Whatever fails after that becomes a
:class:`core.guides.prompt.GuideError` whose message names the endpoint's host, what happened and what to do,
and
never the key.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from core.config_edges import LlmSettings
from core.guides.prompt import ChatMessage, GuideError
from core.json_input import JSONReader
from core.retry_after import retry_after_seconds
from ingest.retrying import Retry, with_retries

log = logging.getLogger(__name__)
_ANSWERS = JSONReader(unique_keys=False)

Sleep = Callable[[float], Awaitable[None]]
TEMPERATURE = 0.2


class ChatClient:
    """One chat-completions client per process; fulfils :class:`core.guides.prompt.GuideModel`."""

    def __init__(
        self,
        settings: LlmSettings,
        *,
        retries: int = 3,
        backoff: float = 2.0,
        max_retry_wait: float = 60.0,
        sleep: Sleep = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not settings.url:
            raise ValueError("PAPERTRAIL_LLM_URL is not set; AI guides are off")
        if not settings.model:
            raise ValueError("PAPERTRAIL_LLM_MODEL is not set; name the model the endpoint serves")
        self._url = settings.url.rstrip("/") + "/chat/completions"
        # Error messages name the host only: a URL can carry credentials or a key in its query.
        self._where = urlsplit(settings.url).netloc.rpartition("@")[2] or "the LLM endpoint"
        self._model = settings.model
        headers = {"User-Agent": settings.user_agent}
        if settings.api_key is not None:
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(settings.timeout, connect=min(settings.timeout, 10.0)),
            transport=transport,
        )
        self._retries = retries
        self._backoff = backoff
        self._max_retry_wait = max_retry_wait
        self._sleep = sleep
        # Set by stop_retrying(): back-offs before a retry end at once (the process is stopping).
        self._stopping = asyncio.Event()

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._model

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    def stop_retrying(self) -> None:
        """End every back-off before a retry now and retry nothing more (the process is stopping)."""
        self._stopping.set()

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> str:
        """The content of the first choice; GuideError once the retries are spent."""
        body = {
            "model": self._model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            "temperature": TEMPERATURE,
            "max_tokens": max_tokens,
        }
        return await with_retries(
            lambda attempt: self._attempt(body, self._backoff * 2 ** (attempt - 1)),
            attempts=self._retries + 1,
            sleep=self._sleep,
            log=log,
            stopping=self._stopping,
        )

    async def _attempt(self, body: dict[str, Any], backoff: float) -> str:
        try:
            response = await self._client.post(self._url, json=body)
        except httpx.TimeoutException as exc:
            error = GuideError(
                f"{self._where} did not answer within {self._client.timeout.read} s ({type(exc).__name__}); "
                "raise PAPERTRAIL_LLM_TIMEOUT or check the server's load"
            )
            raise Retry(error, backoff) from exc
        except httpx.TransportError as exc:
            error = GuideError(
                f"cannot reach the LLM endpoint {self._where} ({type(exc).__name__}); "
                "check PAPERTRAIL_LLM_URL"
            )
            raise Retry(error, backoff) from exc
        self._check_status(response, backoff)
        return self._content(response)

    def _check_status(self, response: httpx.Response, backoff: float) -> None:
        status = response.status_code
        if status == 429:
            hinted = retry_after_seconds(response.headers.get("Retry-After"))
            hint = f"; it asks to wait {hinted:.0f} s" if hinted is not None else ""
            error = GuideError(
                f"{self._where} answered HTTP 429 (rate limited){hint}; lower PAPERTRAIL_LLM_CONCURRENCY "
                "or PAPERTRAIL_LLM_DAILY_LIMIT",
                retry_after=hinted,
            )
            if hinted is not None and hinted > self._max_retry_wait:
                raise error  # longer than a guide is worth waiting for: the next run tries again
            raise Retry(error, hinted if hinted is not None else backoff)
        if status >= 500:
            error = GuideError(
                f"{self._where} answered HTTP {status} {response.reason_phrase}; will retry later"
            )
            raise Retry(error, backoff)
        if status in (401, 403):
            raise GuideError(
                f"{self._where} refused the request (HTTP {status}); check PAPERTRAIL_LLM_API_KEY",
                retryable=False,
            )
        if status >= 400:
            raise GuideError(
                f"{self._where} answered HTTP {status} {response.reason_phrase}; "
                "check PAPERTRAIL_LLM_URL and PAPERTRAIL_LLM_MODEL",
                retryable=False,
            )

    def _content(self, response: httpx.Response) -> str:
        try:
            # The shared rules of untrusted JSON (core.json_input): nested too deeply is a ValueError here.
            content = _ANSWERS.loads(response.content)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            content = None
        if not isinstance(content, str):
            raise GuideError(
                f"{self._where} answered with no chat-completions JSON (choices[0].message.content); "
                "check that PAPERTRAIL_LLM_URL is an OpenAI-compatible base URL such as https://host/v1",
                retryable=False,
            )
        return content
