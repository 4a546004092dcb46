"""The chain schedule against the real Postgres: conversations do not wait for each other,
a conversation's chunks stay in order, and a schedule interrupted by a transient failure
goes on where it stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

import psycopg
import pytest

from slowwave.models.chunk import ApplyResult, PreparedChunk
from slowwave.models.consolidation import ConsolidationOutput
from slowwave.models.embedding.base import Embedder
from slowwave.models.errors import RuntimeUnreachable
from slowwave.models.llm.base import GenerationRequest, ModelAnswer, Purpose
from slowwave.models.llm.openai import OpenAICompatibleModel
from slowwave.models.processes import free_port
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.chains import Backlog, Stages, run_chains
from slowwave.tasks.claim import claim
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.pipeline import RunPolicy, apply_chunks, stages_for
from slowwave.tasks.runs import recorded_run
from slowwave.tasks.transient import is_transient
from tests.fix_episodes import add, at, decisions, episodes_state, make_episode, with_settings
from tests.fix_models import ScriptedModel, episode_keys, fact

Settle = Callable[[ApplyResult], None]

SENTENCES = {
    "f1": "User keeps bees on a rooftop in Lyon",
    "f2": "User is learning the cello",
    "f3": "User ran the Berlin marathon",
    "s1": "User collects vintage postcards",
    "s2": "User works night shifts as a nurse",
}


def _script() -> dict[str, object]:
    return {k: (lambda r, s=s: ConsolidationOutput(facts=[fact(s)])) for k, s in SENTENCES.items()}


@dataclass
class HeldModel:
    """A streaming double: answers by script, but holds back the answer for ``held`` until
    a request for ``release_on`` has been submitted (or ``timeout_s`` passed: then an error).
    """

    scripted: ScriptedModel
    held: str
    release_on: str
    timeout_s: float = 30.0
    name: str = "held"
    released: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def submit(self, requests: Sequence[GenerationRequest]) -> list[Future[ModelAnswer]]:
        futures: list[Future[ModelAnswer]] = []
        for request in requests:
            if self.release_on in episode_keys(request):
                self.released.set()
            future: Future[ModelAnswer] = Future()
            if self.held in episode_keys(request):
                thread = threading.Thread(target=self._later, args=(request, future))
                self.threads.append(thread)
                thread.start()
            else:
                future.set_result(self.scripted.generate([request])[0])
            futures.append(future)
        return futures

    def _later(self, request: GenerationRequest, future: Future[ModelAnswer]) -> None:
        if self.released.wait(self.timeout_s):
            future.set_result(self.scripted.generate([request])[0])
        else:
            future.set_result(ModelAnswer(request.chunk_id, None, "held answer never released"))

    def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
        return [f.result() for f in self.submit(requests)]

    def close(self) -> None:
        for thread in self.threads:
            thread.join()


@pytest.fixture
def single_episode_chunks(settings: Settings) -> Settings:
    """Each episode a chunk of its own, and a conversation due at its first episode."""
    return with_settings(settings, chunk_size=1, episode_threshold=1)


def _two_conversations(conn: psycopg.Connection) -> None:
    add(
        conn,
        *(
            make_episode("fast", k, f"Today's news from me, part {k}.", at(2025, 2, int(k[1])))
            for k in ("f1", "f2", "f3")
        ),
        *(
            make_episode("slow", k, f"Something about me, part {k}.", at(2025, 1, int(k[1])))
            for k in ("s1", "s2")
        ),
    )


@pytest.mark.slow
def test_a_conversation_waiting_on_the_model_does_not_hold_back_the_others(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    single_episode_chunks: Settings,
) -> None:
    _two_conversations(conn)
    # the slow conversation's first answer comes only once the fast one has sent its last
    # chunk: in rounds (chunk k of everyone, then k + 1) that never happens
    model = HeldModel(ScriptedModel(_script()), held="s1", release_on="f3")  # type: ignore[arg-type]
    summary = consolidate(db, model, embedder, single_episode_chunks)
    model.close()

    assert summary.chunks == 5 and summary.chunks_failed == 0, summary.failures
    assert all(e["consolidated_at"] is not None for e in episodes_state(conn).values())
    recorded: dict[str, list[datetime]] = {d["conversation_id"]: [] for d in decisions(conn)}
    for d in decisions(conn):
        recorded[d["conversation_id"]].append(d["recorded_at"])
    assert max(recorded["fast"]) < min(recorded["slow"])  # fast finished while slow waited
    assert len(recorded["fast"]) == 3 and len(recorded["slow"]) == 2


def test_a_conversations_next_chunk_is_asked_only_after_its_previous_chunk_is_applied(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    single_episode_chunks: Settings,
) -> None:
    _two_conversations(conn)
    scripted = ScriptedModel(_script())  # type: ignore[arg-type]
    model = HeldModel(scripted, held="s1", release_on="f3")
    consolidate(db, model, embedder, single_episode_chunks)
    model.close()

    shown = {
        episode_keys(r)[0]: r.user for r in scripted.requests if r.purpose is Purpose.consolidate
    }
    # each prompt shows the facts its own conversation's earlier chunks wrote, and no others
    assert SENTENCES["f1"] in shown["f2"] and SENTENCES["f2"] in shown["f3"]
    assert SENTENCES["s1"] in shown["s2"]
    assert SENTENCES["s1"] not in shown["f3"] and SENTENCES["f3"] not in shown["s2"]


def test_a_schedule_stopped_by_a_dropped_connection_goes_on_where_it_stopped(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    single_episode_chunks: Settings,
) -> None:
    _two_conversations(conn)
    model = ScriptedModel(_script())  # type: ignore[arg-type]
    settings = single_episode_chunks
    applies = 0

    def flaky_apply(prepared: Sequence[PreparedChunk], settle: Settle) -> list:
        nonlocal applies
        applies += 1
        if applies == 2:  # the second step (f2, s2): the first commits, then the line drops
            apply_chunks(db, prepared[:1], policy.consolidation, summary, model.name, settle)
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return apply_chunks(db, prepared, policy.consolidation, summary, model.name, settle)

    policy = RunPolicy.of(settings, model)
    with recorded_run(db, kind="manual") as summary:
        with db.connection() as c:
            backlog = Backlog.of(claim(c, summary.run_id, policy.claim))
        production = stages_for(db, model, embedder, policy, summary)
        stages = Stages(open=production.open, finish=production.finish, apply=flaky_apply)
        with pytest.raises(psycopg.OperationalError):
            run_chains(backlog, summary, model, stages)
        assert backlog.chunks == 2  # f1, s1 and one of f2 / s2 applied; two chunks left
        run_chains(backlog, summary, model, stages)  # what a Prefect retry of the shard does

    # nothing applied twice: a second apply of a committed chunk would be a failed chunk
    assert backlog.chunks == 0 and summary.chunks == 5 and summary.chunks_failed == 0
    assert all(e["consolidated_at"] is not None for e in episodes_state(conn).values())
    written = conn.execute("SELECT fact FROM semantic_memory ORDER BY fact").fetchall()
    assert sorted(s for (s,) in written) == sorted(SENTENCES.values())  # each exactly once


def test_an_unreachable_runtime_fails_the_run_without_charging_any_chunk_an_attempt(
    db: Database,
    conn: psycopg.Connection,
    embedder: Embedder,
    single_episode_chunks: Settings,
) -> None:
    _two_conversations(conn)
    nobody = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    model = OpenAICompatibleModel(nobody, "m", max_retries=2, timeout_s=5)
    with pytest.raises(ConnectionError, match="cannot reach"):
        consolidate(db, model, embedder, single_episode_chunks)
    model.close()

    state = episodes_state(conn).values()
    assert all(e["attempts"] == 0 and e["consolidated_at"] is None for e in state)
    assert all(e["claimed_by"] is None and e["quarantined_at"] is None for e in state)
    (status, error) = conn.execute("SELECT status, error FROM consolidation_runs").fetchone()  # type: ignore[misc]
    assert status == "failed" and "RuntimeUnreachable: cannot reach" in error


def test_a_lost_actor_is_transient_but_an_error_raised_inside_one_is_the_chunks() -> None:
    from slowwave.models.workers.cluster import ray_module
    from slowwave.models.workers.pool import translate

    ray_errors = ray_module().exceptions  # Ray imported the way slowwave imports it

    def raised_in_actor(cause: Exception) -> Exception:
        try:
            raise cause
        except Exception as exc:
            return ray_errors.RayTaskError("submit_one", "traceback", exc).as_instanceof_cause()

    lost = translate(ray_errors.ActorDiedError())
    assert isinstance(lost, RuntimeUnreachable) and is_transient(lost)
    assert is_transient(translate(raised_in_actor(RuntimeUnreachable("the vLLM engine died"))))
    assert is_transient(translate(raised_in_actor(psycopg.OperationalError("connection lost"))))
    bug = translate(raised_in_actor(ValueError("the schema does not compile")))
    assert isinstance(bug, ValueError) and not is_transient(bug)
    assert not is_transient(ValueError("a runtime's own bug"))
