"""``Client`` and ``AsyncClient``: ``slowwave.Memory``'s methods over HTTP.

    from slowwave_client import Client

    with Client() as memory:  # SLOWWAVE_BASE_URL, SLOWWAVE_API_KEY
        memory.record("dana", [{"role": "user", "content": "I moved to Manchester."}])
        answer = memory.search("where does Dana live?", "dana")

Each method is one request (``operations``, shared by both clients). An answer that is not a
success raises the ``slowwave.errors`` class of its code, with the server's message, code and
``Retry-After``. A 429 (rate limited) or 503 (busy, the database coming back) is retried, after
the ``Retry-After`` the server sent (else a short backoff), ``max_retries`` times; so is a
connection that could not be opened. A request that was sent and got no answer in ``timeout``
seconds is not retried: it may have been done (``ServerUnreachable``).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Generator, Mapping
from email.utils import parsedate_to_datetime
from typing import Self, TypeVar, cast

import anyio
import httpx

from slowwave_client import operations as op
from slowwave_client.errors import ServerUnreachable, SlowwaveError, from_answer

T = TypeVar("T")

DEFAULT_BASE_URL = "http://127.0.0.1:8765"  # `slowwave serve`'s default address
RETRIED = frozenset({429, 503})
LONGEST_WAIT_S = 60.0  # a Retry-After beyond this is not waited for: the error is raised


class Settings:
    """What both clients share: where the server is, the key, timeouts and retries."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        self.api_key = api_key if api_key is not None else os.environ.get("SLOWWAVE_API_KEY")
        self.base_url = (base_url or os.environ.get("SLOWWAVE_BASE_URL") or local_url()).rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.headers = {"User-Agent": f"slowwave-client-python/{_version()}", **(headers or {})}
        if self.api_key:
            self.headers["Authorization"] = f"Bearer {self.api_key}"

    def wait_s(self, attempt: int, response: httpx.Response | None) -> float | None:
        """How long to wait before retry ``attempt`` (1 = the first), or None: do not retry."""
        if attempt > self.max_retries:
            return None
        if response is not None:
            if response.status_code not in RETRIED:
                return None
            after = retry_after_s(response.headers.get("Retry-After"))
            if after is not None:
                return after if after <= LONGEST_WAIT_S else None
        return min(0.5 * 2 ** (attempt - 1), 8.0) * (0.75 + random.random() / 2)

    @staticmethod
    def result(call: op.Call[T], response: httpx.Response) -> T:
        if response.is_success:
            return call.parse(response.json())
        raise error_of(response)

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"


def local_url() -> str:
    """The server on this machine: the port ``slowwave serve`` takes from the same
    environment (``SLOWWAVE_SERVE_PORT``), else its default."""
    port = os.environ.get("SLOWWAVE_SERVE_PORT", "").strip()
    return f"http://127.0.0.1:{port}" if port.isdigit() else DEFAULT_BASE_URL


def retry_after_s(value: str | None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds, or an HTTP date."""
    if not value:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def error_of(response: httpx.Response) -> SlowwaveError:
    try:
        body: object = response.json()
    except ValueError:
        body = None
    return from_answer(
        response.status_code, body, retry_after_s(response.headers.get("Retry-After"))
    )


def unreachable(settings: Settings, exc: httpx.TransportError) -> ServerUnreachable:
    what = (
        f"no answer within {settings.timeout:g} s"
        if isinstance(exc, httpx.TimeoutException)
        else f"cannot reach it: {exc}"
    )
    return ServerUnreachable(f"slowwave at {settings.base_url}: {what}")


SEND = "send"  # what an exchange asks its driver for: send the request (else: sleep so long)
Outcome = httpx.Response | httpx.TransportError


def exchange(settings: Settings, call: op.Call[T]) -> Generator[str | float, Outcome, T]:
    """One call's requests and waits, without I/O: it yields ``SEND`` (the driver sends the
    request and sends back the response or the transport error) or a wait in seconds, and
    returns the answer or raises its error. Both clients drive it, one blocking, one async."""
    attempt = 0
    while True:
        attempt += 1
        outcome = yield SEND
        if isinstance(outcome, httpx.TransportError):
            wait = None if _sent(outcome) else settings.wait_s(attempt, None)
            if wait is None:
                raise unreachable(settings, outcome)
        else:
            wait = settings.wait_s(attempt, outcome)
            if wait is None:
                return settings.result(call, outcome)
        yield wait


def _sent(exc: httpx.TransportError) -> bool:
    """Whether the request may have reached the server (then it is not sent again)."""
    return not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout)


def _version() -> str:
    from slowwave_client import __version__

    return __version__


class Client(op.Operations):
    """slowwave's memory over HTTP, one request at a time (thread-safe, as httpx's client is).

    ``api_key``: else ``SLOWWAVE_API_KEY`` (none: a server on loopback that has no keys);
    ``base_url``: else ``SLOWWAVE_BASE_URL``, else this machine's server
    (``http://127.0.0.1:8765``, or the port in ``SLOWWAVE_SERVE_PORT``); ``timeout`` in
    seconds; ``max_retries`` for 429 and 503 answers and connections refused."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.settings = Settings(
            api_key, base_url, timeout=timeout, max_retries=max_retries, headers=headers
        )
        self._http = http_client or httpx.Client(timeout=timeout)
        self._own_http = http_client is None

    def _send(self, call: op.Call[T]) -> T:
        steps = exchange(self.settings, call)
        step = next(steps)
        try:
            while True:
                if step == SEND:
                    outcome: Outcome
                    try:
                        outcome = self._http.request(
                            call.method,
                            self.settings.base_url + call.path,
                            params=call.params,
                            json=call.body,
                            headers=self.settings.headers,
                            timeout=self.settings.timeout,  # a lent client's too
                        )
                    except httpx.TransportError as exc:
                        outcome = exc
                    step = steps.send(outcome)
                else:
                    time.sleep(float(step))
                    step = next(steps)
        except StopIteration as done:
            return cast(T, done.value)

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(base_url={self.settings.base_url!r})"


class AsyncClient(op.AsyncOperations):
    """``Client``'s methods as coroutines, over one ``httpx.AsyncClient`` (asyncio or trio)."""

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        headers: Mapping[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.settings = Settings(
            api_key, base_url, timeout=timeout, max_retries=max_retries, headers=headers
        )
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._own_http = http_client is None

    async def _send(self, call: op.Call[T]) -> T:
        steps = exchange(self.settings, call)
        step = next(steps)
        try:
            while True:
                if step == SEND:
                    outcome: Outcome
                    try:
                        outcome = await self._http.request(
                            call.method,
                            self.settings.base_url + call.path,
                            params=call.params,
                            json=call.body,
                            headers=self.settings.headers,
                            timeout=self.settings.timeout,  # a lent client's too
                        )
                    except httpx.TransportError as exc:
                        outcome = exc
                    step = steps.send(outcome)
                else:
                    await anyio.sleep(float(step))
                    step = next(steps)
        except StopIteration as done:
            return cast(T, done.value)

    async def close(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient(base_url={self.settings.base_url!r})"


__all__ = ["DEFAULT_BASE_URL", "AsyncClient", "Client", "Settings"]
