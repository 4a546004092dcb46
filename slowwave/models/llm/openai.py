"""Any OpenAI-compatible chat-completions endpoint: a vLLM server, llama.cpp's server,
Ollama, or a hosted API.

Requests are streamed with bounded concurrency, each answered as it returns; each call asks
for the answer schema through ``response_format`` (JSON schema), has a timeout, and is
retried with jittered exponential backoff on 429, 5xx and connection errors. A refusal (429,
503: a hosted model's backpressure) is waited out for as long as its ``Retry-After`` says (at
most ``MAX_RETRY_AFTER_S``, plus up to a second of jitter, so that refused requests do not
return together), and halves the requests let in at once (``AdaptiveLimit``) until answers
raise it again; each answer says how many refusals it met and how long it waited
(``ModelAnswer.refusals`` / ``waited_s``: the run's record adds them up). A request that has
waited ``max_wait_s`` in all, or was tried ``max_retries`` times, gives up. An endpoint that
stays unreachable, overloaded (429) or unavailable (502-504) raises ``RuntimeUnreachable``
(transient: the run fails with its claims released and retries, no chunk is charged); other
failures, such as a 500 on one prompt, are that chunk's error answer. The API key comes from
settings and is never logged.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.llm.background_loop import BackgroundLoop
from slowwave.models.llm.base import GenerationRequest, ModelAnswer
from slowwave.models.llm.catalog import model_label
from slowwave.models.llm.strict_schema import strict_subset
from slowwave.models.llm.tokens import estimate_tokens

# How the answer schema is asked for: OpenAI's ``json_schema`` response format (vLLM, hosted
# APIs), ``json_object`` with a ``schema`` (llama-cpp-python's server), or the GBNF grammar
# ``grammar_of`` makes of it (llama.cpp's own server, given llama-cpp-python's grammar).
SchemaDialect = Literal["json_schema", "json_object", "grammar"]

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
UNAVAILABLE = {429, 502, 503, 504}  # after the last retry: the run is retried, not the chunk
REFUSED = {429, 503}  # the endpoint's backpressure: wait as it says, fewer requests at once
MAX_RETRY_AFTER_S = 60.0  # a Retry-After longer than this is waited this long, then asked again


def retry_after_s(response: httpx.Response) -> float | None:
    """How long ``Retry-After`` asks to wait, in seconds (a number or an HTTP date); None
    where it says neither."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _refused(exc: BaseException | None) -> httpx.Response | None:
    if isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in REFUSED:
        return exc.response
    return None


class AdaptiveLimit:
    """At most ``limit`` requests in flight: ``ceiling`` at first, halved (never below one) at
    each refusal, one more after as many answers as it lets in (TCP's additive increase,
    multiplicative decrease), back up to ``ceiling``. Made on the event loop that uses it."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.in_flight = 0
        self._answers = 0  # since the limit last changed
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.in_flight -= 1
            self._changed.notify_all()

    def refused(self) -> None:
        self.limit, self._answers = max(1, self.limit // 2), 0

    async def answered(self) -> None:
        if self.limit >= self.ceiling:
            return
        self._answers += 1
        if self._answers >= self.limit:
            async with self._changed:
                self.limit, self._answers = self.limit + 1, 0
                self._changed.notify_all()


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.HTTPStatusError):
        return exc.response.status_code in RETRYABLE_STATUS
    return isinstance(exc, httpx.TransportError)


class OpenAICompatibleModel:
    """A ``StructuredModel`` over HTTP."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 5,
        max_wait_s: float = 300.0,
        extra_body: dict[str, Any] | None = None,
        strict: bool = True,
        context_tokens: int = 8192,
        schema_dialect: SchemaDialect = "json_schema",
        grammar_of: Callable[[dict[str, Any]], str] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        if schema_dialect == "grammar" and grammar_of is None:
            raise ValueError("the grammar dialect needs grammar_of: a schema's grammar")
        self.grammar_of = grammar_of
        self.name = model_label("openai", model)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_wait_s = max_wait_s
        self.extra_body = dict(extra_body or {})
        self.strict = strict
        self.context_tokens = context_tokens
        self.schema_dialect = schema_dialect
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._loop: BackgroundLoop | None = None  # started on first use: the model pickles
        self._client: httpx.AsyncClient | None = None
        self._limit: AdaptiveLimit | None = None
        self._starting = threading.Lock()  # shards on threads may make their first call at once

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompatibleModel(base_url={self.base_url!r}, model={self.model!r})"

    def body(self, request: GenerationRequest) -> dict[str, Any]:
        schema = strict_subset(request.json_schema) if self.strict else request.json_schema
        if self.schema_dialect == "json_object":  # llama-cpp-python's server
            response_format: dict[str, Any] = {"type": "json_object", "schema": schema}
        else:
            response_format = {
                "type": "json_schema",
                "json_schema": {
                    "name": "consolidation_output",
                    "schema": schema,
                    "strict": self.strict,
                },
            }
        if self.schema_dialect == "grammar" and self.grammar_of is not None:
            constraint: dict[str, Any] = {"grammar": self.grammar_of(schema)}
        else:
            constraint = {"response_format": response_format}
        return {
            **self.extra_body,
            "model": self.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            "max_tokens": request.answer_limit(self.max_tokens),
            "temperature": self.temperature,
            **constraint,
        }

    def __getstate__(self) -> dict[str, Any]:
        """Sent to another process (a shard on a Ray worker): the settings travel, the loop
        and the HTTP client are made again there on first use."""
        state = {**self.__dict__, "_loop": None, "_client": None, "_limit": None}
        del state["_starting"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _starting=threading.Lock())

    def count_tokens(self, text: str, /) -> int:
        """The endpoint's tokenizer is out of reach: a conservative estimate."""
        return estimate_tokens(text)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        """Each request in flight at once (at most ``concurrency``), answered as it returns."""
        with self._starting:
            if self._loop is None:
                self._loop = BackgroundLoop("openai-client")
            loop = self._loop
        return [loop.submit(self._limited(r)) for r in requests]

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return [f.result() for f in self.submit(requests)]

    async def _limited(self, request: GenerationRequest) -> ModelAnswer:
        if self._client is None or self._limit is None:  # made on the loop that uses them
            timeout = httpx.Timeout(self.timeout_s, connect=min(10.0, self.timeout_s))
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=self._headers, timeout=timeout
            )
            self._limit = AdaptiveLimit(self.concurrency)
        answer = await self._call(self._client, self._limit, request)
        if answer.error is None:
            await self._limit.answered()
        return answer

    async def _call(
        self, client: httpx.AsyncClient, limit: AdaptiveLimit, request: GenerationRequest
    ) -> ModelAnswer:
        backoff = wait_exponential_jitter(initial=0.5, max=20)
        refusals, waited = 0, 0.0

        def pause(state: RetryCallState) -> float:
            """As long as a refusal's Retry-After says, else the backoff's."""
            nonlocal waited
            refused = _refused(state.outcome.exception() if state.outcome else None)
            after = retry_after_s(refused) if refused is not None else None
            if after is None:
                seconds = backoff(state)
            else:  # jittered, so that requests refused together do not come back together
                seconds = min(after, MAX_RETRY_AFTER_S) + random.uniform(0, 1)
            waited += seconds
            return seconds

        try:
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.max_retries) | stop_after_delay(self.max_wait_s),
                wait=pause,
                retry=retry_if_exception(_retryable),
                reraise=False,
            ):
                with attempt:
                    async with limit:  # not held while waiting: the others may go on
                        response = await client.post("/chat/completions", json=self.body(request))
                    if response.status_code in REFUSED:
                        refusals += 1
                        limit.refused()
                    response.raise_for_status()
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            if _unavailable(cause):  # the endpoint is down or saturated, not the chunk bad
                raise RuntimeUnreachable(
                    f"cannot reach {self.base_url}: {_describe(cause)}"
                ) from None
            answer = ModelAnswer(
                request.chunk_id, None, f"gave up after retries: {_describe(cause)}"
            )
        except httpx.HTTPError as exc:
            answer = ModelAnswer(request.chunk_id, None, _describe(exc))
        else:
            answer = answer_of(request.chunk_id, response.json())
        return replace(answer, refusals=refusals, waited_s=waited)

    def close(self) -> None:
        if self._loop is None:
            return
        if self._client is not None:
            self._loop.run(self._client.aclose())
            self._client = None
        self._loop.close()
        self._loop = None


def answer_of(chunk_id: str, payload: dict[str, Any]) -> ModelAnswer:
    """The answer a chat completion ``payload`` holds, with the tokens it billed."""
    usage = payload.get("usage") or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    try:
        choice = payload["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        reason = "response has no choices[0].message.content"
        return ModelAnswer(chunk_id, None, reason, prompt, completion)
    finish = choice.get("finish_reason")
    return ModelAnswer(
        chunk_id,
        text,
        None,
        prompt,
        completion,
        {"finish_reason": finish},
        truncated=finish == "length",
        cached_tokens=cached_prompt_tokens(payload, prompt),
    )


def cached_prompt_tokens(payload: dict[str, Any], prompt_tokens: int) -> int:
    """Prompt tokens the server took from its prefix cache: OpenAI's and vLLM's
    ``usage.prompt_tokens_details.cached_tokens``, else llama.cpp's ``timings.cache_n``; 0 where
    the server says neither (every billed token is then counted as computed)."""
    usage = payload.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens")
    if cached is None:
        cached = (payload.get("timings") or {}).get("cache_n")
    try:
        return max(0, min(int(cached or 0), prompt_tokens))
    except (TypeError, ValueError):
        return 0


def _unavailable(exc: BaseException | None) -> bool:
    """Still failing after every retry for a reason of the endpoint's, whatever the prompt."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return True
    return isinstance(exc, httpx.HTTPStatusError) and exc.response.status_code in UNAVAILABLE


def _describe(exc: BaseException | None) -> str:
    """An error's description without request headers (the key stays out of logs)."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url}"
    if exc is None:
        return "unknown error"
    return f"{type(exc).__name__}: {exc}"
