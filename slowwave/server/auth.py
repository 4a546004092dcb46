"""Who a request is: its bearer key, checked against the stored SHA-256s, and its rate.

The key travels only in the ``Authorization`` header, and is never logged, stored, echoed or
counted by name: a listing names a key by its first characters.
"""

from __future__ import annotations

import threading
import time

from slowwave.models.errors import RateLimited, Unauthorized
from slowwave.models.keys import ApiKey
from slowwave.service import Caller, Service
from slowwave.tasks.keys import authenticate


class RateLimit:
    """A token bucket per key, in this process: ``rate`` a second, ``burst`` at once. Replicas
    count apart (the limit a client meets is the rate times the replicas it reaches)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, who: str) -> float | None:
        """None when ``who`` may go on; else the seconds until it may."""
        now = time.monotonic()
        with self._lock:
            tokens, then = self._buckets.get(who, (self.burst, now))
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens >= 1:
                self._buckets[who] = (tokens - 1, now)
                return None
            self._buckets[who] = (tokens, now)
            return (1 - tokens) / self.rate


class Authenticator:
    def __init__(self, service: Service, *, enabled: bool = True) -> None:
        self.service = service
        self.enabled = enabled
        settings = service.settings
        self.limit = RateLimit(settings.serve.rate_per_s, settings.serve.rate_burst)

    def caller(self, authorization: str | None, *, limited: bool = True) -> Caller:
        """The caller a request's ``Authorization`` header names, or ``Unauthorized`` /
        ``RateLimited`` (``Busy`` when the pool is)."""
        if not self.enabled:
            return Caller.operator()
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise Unauthorized(
                "send a key as `Authorization: Bearer <key>` (`slowwave keys create`)"
            )
        found = self.key(key)
        if limited:
            self.pace(found)
        return Caller.of(found)

    def key(self, key: str) -> ApiKey:
        """The live key ``key`` is (a bearer header's, a sign-in form's), or ``Unauthorized``."""
        with self.service.connection() as conn:  # a fast 503 when the pool is busy
            found = authenticate(conn, key.strip())
        if found is None:
            raise Unauthorized("this key is not valid (unknown or revoked)")
        return found

    def pace(self, key: ApiKey) -> None:
        """``RateLimited`` when ``key`` asks faster than its rate (each request, each page)."""
        wait = self.limit.take(str(key.id))
        if wait is not None:
            raise RateLimited(
                f"this key made more than {self.limit.rate:g} requests a second: slow down",
                retry_after_s=wait,
            )
