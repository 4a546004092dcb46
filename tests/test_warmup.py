"""Runtimes started ahead of a flow in the same process (`models.warmup`): the flow takes the
ones started for its settings and owns them; whatever it did not take is closed at the end."""

from __future__ import annotations

import threading
from typing import Any

from slowwave.models.settings import Settings
from slowwave.models.warmup import started_ahead, started_ahead_for, starts_ahead, take
from tests.fix_episodes import with_settings


class Runtime:
    """A runtime's lifecycle as the flow sees it: started, then closed once."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def starting(started: list[Runtime], name: str, gate: threading.Event | None = None) -> Any:
    def start(settings: Settings) -> Runtime:
        if gate is not None:
            assert gate.wait(10)
        runtime = Runtime(name)
        started.append(runtime)
        return runtime

    return start


def failing(settings: Settings) -> Runtime:
    raise RuntimeError("no such model")


def test_the_flow_takes_what_was_started_for_its_settings_and_the_rest_is_closed(
    settings: Settings,
) -> None:
    started: list[Runtime] = []
    starts = {"model": starting(started, "model"), "embedder": starting(started, "embedder")}
    with started_ahead(settings, starts):
        model = take("model", settings)
        assert isinstance(model, Runtime) and model.name == "model"
        assert take("model", settings) is None  # taken once: a second flow starts its own
        assert started_ahead_for("embedder") and not started_ahead_for("model")
    embedder = next(r for r in started if r.name == "embedder")
    assert model.closed == 0  # the flow's to close
    assert embedder.closed == 1  # nobody took it
    assert not started_ahead_for("embedder")


def test_other_settings_start_their_own_and_the_runtime_started_ahead_is_closed(
    settings: Settings,
) -> None:
    started: list[Runtime] = []
    with started_ahead(settings, {"model": starting(started, "model")}):
        assert take("model", with_settings(settings, llm_max_tokens=321)) is None
    assert [r.closed for r in started] == [1]


def test_the_flow_waits_for_a_runtime_still_starting(settings: Settings) -> None:
    started: list[Runtime] = []
    gate = threading.Event()
    with started_ahead(settings, {"embedder": starting(started, "embedder", gate)}):
        threading.Timer(0.2, gate.set).start()
        embedder = take("embedder", settings)
    assert isinstance(embedder, Runtime) and embedder.closed == 0


def test_a_start_ahead_that_failed_is_dropped_so_the_flow_starts_its_own(
    settings: Settings,
) -> None:
    started: list[Runtime] = []
    with started_ahead(settings, {"model": failing, "embedder": starting(started, "embedder")}):
        assert take("model", settings) is None
    assert [r.closed for r in started] == [1]


def test_a_block_left_early_closes_a_runtime_that_finished_starting_after_it(
    settings: Settings,
) -> None:
    started: list[Runtime] = []
    gate = threading.Event()
    try:
        with started_ahead(settings, {"model": starting(started, "model", gate)}):
            threading.Timer(0.2, gate.set).start()
            raise KeyboardInterrupt  # the operator's Ctrl-C while the API starts
    except KeyboardInterrupt:
        pass
    assert [r.closed for r in started] == [1]


def test_only_llamacpps_server_and_a_local_embedder_start_ahead(settings: Settings) -> None:
    assert set(starts_ahead(with_settings(settings, llm_runtime="llamacpp"))) == {
        "model",
        "embedder",
    }
    assert set(starts_ahead(with_settings(settings, llm_runtime="replay"))) == {"embedder"}
    on_ray = with_settings(settings, llm_runtime="vllm", embedding_actors_per_node=1)
    assert starts_ahead(on_ray) == {}
