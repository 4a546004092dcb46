"""A pool of Ray actors, each hosting one model runtime, behind the runtime's own interface.

Created once per run and reused: an engine takes seconds to minutes to start. Sized by the
cluster: one actor per GPU where there are GPUs, otherwise ``actors_per_node`` CPU actors per
node. Work is split into one contiguous shard per actor and the results put back in order, so
the stages see the same interface as for an in-process runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from models.ray_cluster import acquire_ray, cluster_shape, ray_module, release_ray
from slowwave.settings import Settings

T = TypeVar("T")


class _Host:
    """What runs inside each actor: one runtime object and a generic call."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.runtime = factory()

    def call(self, method: str, *args: Any) -> Any:
        return getattr(self.runtime, method)(*args)

    def attribute(self, name: str) -> Any:
        return getattr(self.runtime, name)

    def close(self) -> None:
        self.runtime.close()


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
    ) -> None:
        acquire_ray(settings)
        self._holding_ray = True
        ray = ray_module()
        nodes, gpus = cluster_shape()
        if use_gpus and gpus > 0:
            count, resources = gpus, {"num_gpus": 1, "num_cpus": cpus_per_actor}
        else:
            count, resources = nodes * actors_per_node, {"num_cpus": cpus_per_actor}
        remote = ray.remote(**resources)(_Host)
        self.name = name
        self.actors = [remote.remote(factory) for _ in range(max(count, 1))]
        try:  # fail now, with the runtime's own error, if an engine cannot start
            ray.get([a.attribute.remote("name") for a in self.actors])
        except BaseException:
            self.close()
            raise

    def attribute(self, name: str) -> Any:
        return ray_module().get(self.actors[0].attribute.remote(name))

    def map(self, method: str, items: Sequence[Any]) -> list[Any]:
        """Call ``method(shard)`` on every actor and concatenate the results in order."""
        if not items:
            return []
        ray = ray_module()
        parts = shards(items, len(self.actors))
        futures = [a.call.remote(method, part) for a, part in zip(self.actors, parts, strict=False)]
        results: list[Any] = []
        for part in ray.get(futures):
            results.extend(part)
        return results

    def close(self) -> None:
        ray = ray_module()
        if ray.is_initialized():
            for actor in self.actors:
                ray.kill(actor)
        self.actors = []
        if self._holding_ray:
            self._holding_ray = False
            release_ray()
