"""A pool of Ray actors, each hosting one model runtime, behind the runtime's own interface.

Created once per run and reused: an engine takes seconds to minutes to start. Sized by the
cluster: one actor per GPU where there are GPUs, otherwise ``actors_per_node`` CPU actors per
node. Work is split into one contiguous shard per actor and the results put back in order, so
the stages see the same interface as for an in-process runtime.

A streaming pool (``streaming=True``) hosts runtimes that answer request by request
(``submit``): each item becomes its own call on the least busy actor, and the caller gets a
future per item that resolves as soon as that item is done.

The actors are named (``slowwave-<pool>-<id>-<n>`` in the ``slowwave`` namespace): a pool sent
to a Ray worker (a shard of the flow running there) travels as those names and is looked up
again, so every shard shares the run's engines. Only the pool that created them stops them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from functools import partial
from typing import Any, TypeVar

from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.settings import Settings
from slowwave.models.workers.cluster import (
    acquire_ray,
    cluster_shape,
    current_node,
    ray_module,
    release_ray,
)

T = TypeVar("T")
RESTARTS = 2  # an actor that crashes more often than this is broken, not unlucky
DOWN_S = 30.0  # how long an actor that went away is passed over (a restart takes about this)


NAMESPACE = "slowwave"


class _Host:
    """What runs inside each actor: one runtime object and a generic call."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.runtime = factory()

    def node(self) -> str:
        return current_node()

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.runtime, method)(*args)

    def attribute(self, name: str) -> Any:
        return getattr(self.runtime, name)

    def close(self) -> None:
        self.runtime.close()


class _StreamingHost:
    """An async actor: many ``submit`` calls in flight at once, all into one runtime."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.runtime = factory()

    async def submit_one(self, method: str, item: Any) -> Any:
        try:
            return await asyncio.wrap_future(getattr(self.runtime, method)([item])[0])
        except Exception:
            if not getattr(self.runtime, "alive", True):
                # a dead engine does not come back in this process; exiting lets Ray restart
                # the actor, and the calls in flight fail as lost (transient: retried)
                os._exit(1)
            raise

    async def attribute(self, name: str) -> Any:
        return getattr(self.runtime, name)

    async def node(self) -> str:
        return current_node()

    async def close(self) -> None:
        self.runtime.close()


def translate(exc: BaseException) -> BaseException:
    """A Ray failure as slowwave's own: a lost actor, worker or node is ``RuntimeUnreachable``
    (transient: the shard is retried and no chunk is charged, a restarted actor answers
    again); an exception the runtime raised inside the actor is that exception (its cause).
    Anything else is returned as it is."""
    errors = ray_module().exceptions
    if isinstance(exc, errors.RayTaskError):  # raised by the code the actor ran
        cause = exc.cause
        if cause is None or cause is exc:
            return exc
        if cause.__cause__ is None:
            cause.__cause__ = exc  # keep the actor's traceback
        return translate(cause)
    if getattr(exc, "actor_init_failed", False):  # the runtime could not start: its own error
        return exc
    lost = (  # the actor, its process or its node went away
        errors.RayActorError,  # ActorDiedError, ActorUnavailableError
        errors.WorkerCrashedError,
        errors.NodeDiedError,
        errors.ObjectLostError,
        errors.RaySystemError,
    )
    if isinstance(exc, lost):
        unreachable = RuntimeUnreachable(f"a Ray worker went away: {type(exc).__name__}: {exc}")
        unreachable.__cause__ = exc
        return unreachable
    return exc


def _get(refs: Any) -> Any:
    """``ray.get`` with its failures translated."""
    try:
        return ray_module().get(refs)
    except Exception as exc:
        raise translate(exc) from exc


def shards(items: Sequence[T], parts: int) -> list[list[T]]:
    """``items`` in ``parts`` contiguous, near-equal slices (empty slices dropped)."""
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        if end > start:
            out.append(list(items[start:end]))
        start = end
    return out


class ActorPool:
    """N actors hosting ``factory()``; ``map`` spreads a batch over them."""

    def __init__(
        self,
        settings: Settings,
        factory: Callable[[], Any],
        *,
        actors_per_node: int,
        cpus_per_actor: float = 1.0,
        use_gpus: bool = True,
        name: str = "runtime",
        streaming: bool = False,
    ) -> None:
        acquire_ray(settings)
        self._holding_ray = True
        ray = ray_module()
        nodes, gpus = cluster_shape()
        if use_gpus and gpus > 0:
            count, resources = gpus, {"num_gpus": 1, "num_cpus": cpus_per_actor}
        else:
            count, resources = nodes * actors_per_node, {"num_cpus": cpus_per_actor}
        host = _StreamingHost if streaming else _Host
        # a crashed actor is started again (its engine too); the calls it had in flight fail
        # with a Ray error, which the flow treats as transient and retries the shard
        # spread: a pool sized per node puts its actors on every node, not the first one's
        remote = ray.remote(max_restarts=RESTARTS, scheduling_strategy="SPREAD", **resources)(host)
        self.name = name
        self.actor_names = [
            f"slowwave-{name}-{uuid.uuid4().hex[:12]}-{i}" for i in range(max(count, 1))
        ]
        self.actors = [
            remote.options(name=n, namespace=NAMESPACE).remote(factory) for n in self.actor_names
        ]
        self._owner = True
        self._init_state()
        try:  # fail now, with the runtime's own error, if an engine cannot start
            self.nodes: list[str] = _get([a.node.remote() for a in self.actors])
        except BaseException:
            self.close()
            raise

    def _init_state(self) -> None:
        self._busy = [0] * len(self.actors)  # items in flight per actor, for ``submit``
        self._down_until = [0.0] * len(self.actors)  # monotonic time an actor is passed over
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        """A pool travels as its actors' names: the receiver looks them up, and never stops
        them (the pool that created them does)."""
        return {"name": self.name, "actor_names": self.actor_names, "nodes": self.nodes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ray = ray_module()
        self.name, self.actor_names, self.nodes = (
            state["name"],
            state["actor_names"],
            state["nodes"],
        )
        self.actors = [ray.get_actor(n, namespace=NAMESPACE) for n in self.actor_names]
        self._owner = False
        self._holding_ray = False
        self._init_state()

    def attribute(self, name: str) -> Any:
        return _get(self.actors[0].attribute.remote(name))

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        """Call ``method(shard)`` on every actor and concatenate the results in order."""
        if not items:
            return []
        parts = shards(items, len(self.actors))
        futures = [a.call.remote(method, part) for a, part in zip(self.actors, parts, strict=False)]
        results: list[Any] = []
        for index, (future, part) in enumerate(zip(futures, parts, strict=False)):
            results.extend(self._part(index, future, method, part))
        return results

    def _part(self, index: int, ref: Any, method: str, part: list[Any]) -> list[Any]:
        """Actor ``index``'s answer to ``part``; when that actor went away (its process or its
        node lost), the same part on the other actors in turn, those not passed over first:
        the actors are alike, so a lost machine does not stall the shard while its actors
        restart elsewhere. ``RuntimeUnreachable`` once every actor has failed it."""
        ray = ray_module()
        lost = (ray.exceptions.RayActorError, ray.exceptions.NodeDiedError)
        tried = {index}
        while True:
            try:
                return list(ray.get(ref))
            except lost as exc:
                now = time.monotonic()
                with self._lock:
                    self._down_until[index] = now + DOWN_S
                    others = sorted(
                        (i for i in range(len(self.actors)) if i not in tried),
                        key=lambda i: self._down_until[i] > now,
                    )
                if not others:
                    raise translate(exc) from exc
                index = others[0]
                tried.add(index)
                ref = self.actors[index].call.remote(method, part)
            except Exception as exc:
                raise translate(exc) from exc

    def submit(self, method: str, items: Sequence[Any]) -> list[Future[Any]]:
        """Each item to the least busy actor (a streaming pool); a future per item, in order.

        Cancelling a future cancels its Ray task (and so the engine's request). An actor whose
        call failed because it went away is passed over for ``DOWN_S`` while others are up,
        so a broken actor, which looks idle, does not draw all the work.
        """
        ray = ray_module()
        futures: list[Future[Any]] = []
        for item in items:
            with self._lock:
                now = time.monotonic()
                up = [i for i, t in enumerate(self._down_until) if t <= now]
                index = min(up or range(len(self.actors)), key=self._busy.__getitem__)
                self._busy[index] += 1
            ref = self.actors[index].submit_one.remote(method, item)
            outer: Future[Any] = Future()
            ref.future().add_done_callback(partial(self._done, index, outer))
            outer.add_done_callback(partial(self._cancelled, ray, ref))
            futures.append(outer)
        return futures

    def _done(self, index: int, outer: Future[Any], inner: Future[Any]) -> None:
        exc = None if inner.cancelled() else inner.exception()
        with self._lock:
            self._busy[index] -= 1
            if isinstance(exc, ray_module().exceptions.RayActorError):
                self._down_until[index] = time.monotonic() + DOWN_S
        if outer.done():  # cancelled by the caller
            return
        try:
            if exc is not None:
                outer.set_exception(translate(exc))
            else:
                outer.set_result(inner.result())
        except InvalidStateError:  # cancelled in between
            pass

    @staticmethod
    def _cancelled(ray: Any, ref: Any, outer: Future[Any]) -> None:
        if outer.cancelled():
            ray.cancel(ref)

    def close(self) -> None:
        ray = ray_module()
        if self._owner and ray.is_initialized():
            for actor in self.actors:
                ray.kill(actor)
        self.actors = []
        if self._holding_ray:
            self._holding_ray = False
            release_ray()


def actor_nodes(runtime: object) -> list[str]:
    """The nodes of a runtime's actors, one entry per actor (none for an in-process one)."""
    pool = getattr(runtime, "pool", None)
    return list(pool.nodes) if isinstance(pool, ActorPool) else []
