"""The reliability scenarios of ``tests/reliability`` at full size, counted per scenario.

- crash: a SIGKILL of the consolidating process at each of the 24 fault points of a run
  (``models/faultpoints.py``, ``RUN_POINTS``), mid-run, then a rerun; the end state compared
  with a clean run's. The killed process runs behind a temporary Prefect API of its own, as a
  backfill does where no `slowwave server` runs: ``helpers_left`` counts what it started that
  is still alive 15 s after the kill (must be 0). The killed run names its conversations, as
  a run asked for explicitly does (it closes their open episodes first: ``close.after``), the
  rerun names none;
- concurrency: runs that claim at the same moment on one database, each its share;
- overtaken: a run stalls past its lease and another run takes its work over;
- model faults: each fault of a test model in one conversation among healthy ones, the run
  repeated until the fault's chunk is quarantined (``SLOWWAVE_MAX_ATTEMPTS``);
- injection: a transcript line that makes an obedient model invalidate every fact;
- database faults: the nightly flow with the connection dropped mid-apply and at COMMIT, and a
  COMMIT whose confirmation was lost (skipped with ``--quick``: each retry waits its backoff);
- postgres restart: the server restarted under an open apply, at COMMIT and while the shard's
  claim is being taken (skipped with ``--quick``);
- node loss: the nightly flow on a local two-node Ray cluster, every process of the second node
  killed once three shards have started, the node started again and the flow run again
  (skipped with ``--quick``; the run that lost the node counts in ``runs``);
- forget in flight: a run held at each fault point while a forget of one of its conversations
  arrives: nothing of that conversation may be left (``left_behind``: columns holding its id or
  its planted marker), the others end as a clean run of them alone ends; ``operation_s_max`` is
  the longest a forget took once the run went on;
- revert in flight: a run that has claimed the later days of every conversation, held at each
  fault point while the run that consolidated their first days is reverted; refused when the
  held run committed on it first (then reverted with ``--cascade`` once it ended); a rerun must
  end where a clean run ends.

Per scenario: runs, lost episodes (neither consolidated nor quarantined when every run has
ended: must be 0), duplicate active facts (must be 0), and how many end states differ from a
clean run's (must be 0).

``--points`` takes some fault points instead of all of them (``--quick --points
commit.before`` runs every scenario once, in well under a minute: the harness, not figures).

    python -m benchmarks.reliability [--quick] [--points NAME ...] [--scenarios NAME ...]
        [--json]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.homes import fresh_home
from benchmarks.report import print_figures
from slowwave.models.processes import unwind_on_sigterm

# the scenarios whose faults are the chunks' own: their episodes are charged attempts
CHARGING = frozenset({"model_faults", "injection"})
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"
TABLES = (
    "decision_log, consolidation_chunks, semantic_memory, ingested_messages, episodic_memory, "
    "consolidation_runs, history_operations, conversation_profiles"
)


@dataclass
class Scenario:
    """What one scenario did and what it left."""

    cases: int = 0
    runs: int = 0
    lost_episodes: int = 0
    duplicate_facts: int = 0
    differ_from_clean: int = 0
    broken_invariants: int = 0
    quarantined_episodes: int = 0  # with their reason: a fault's chunk, a held plan
    # episodes charged an attempt (a chunk's own failure: a model fault, a held plan); a lost
    # connection, server or node is no chunk's fault and charges none
    episodes_charged: int = 0
    left_behind: int = 0  # places still holding a forgotten conversation (must be 0)
    operations_refused: int = 0  # reverts refused: the held run had committed on the run first
    operation_s_max: float = 0.0  # the longest an operation took once the held run went on
    helpers_started: int = 0  # processes a killed run had started (its watchdog, its API ...)
    helpers_left: int = 0  # of those, still alive 15 s after the kill (must be 0)
    seconds: float = 0.0


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no flow scenario")
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument(
        "--points", nargs="+", default=None, metavar="NAME", help="these fault points, not all"
    )
    parser.add_argument(
        "--scenarios", nargs="+", default=None, metavar="NAME", help="these scenarios, not all"
    )
    args = parser.parse_args()
    from slowwave.models.faultpoints import RUN_POINTS

    points = tuple(args.points or RUN_POINTS)
    unknown = sorted(set(points) - set(RUN_POINTS))
    if unknown:
        parser.error(f"no fault point {', '.join(unknown)}; one of {', '.join(RUN_POINTS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    sizes = (
        {
            "crash": 3,
            "runs": 4,
            "concurrent": 12,
            "overtaken": 3,
            "injection": 3,
            "healthy": 2,
            "in_flight": 2,
        }
        if args.quick
        else {
            "crash": 24,
            "runs": 8,
            "concurrent": 96,
            "overtaken": 24,
            "injection": 24,
            "healthy": 12,
            "in_flight": 12,
        }
    )

    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate
    from slowwave.sql.db.embedded import postmaster_pid, stop_embedded, stop_warden

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="slowwave-reliability-") as tmp:
        home = fresh_home(tmp)
        settings = Settings(home=home, _env_file=None)
        with Database(settings) as db:
            migrate(db)
            scenarios: dict[str, Callable[[], Scenario]] = {
                "crash": lambda: crash(db, home, sizes["crash"], points),
                "concurrency": lambda: concurrency(db, home, sizes["runs"], sizes["concurrent"]),
                "overtaken": lambda: overtaken(db, home, sizes["overtaken"]),
                "model_faults": lambda: model_faults(db, home, sizes["healthy"]),
                "injection": lambda: injection(db, home, sizes["injection"]),
                "forget_in_flight": lambda: forget_in_flight(db, home, sizes["in_flight"], points),
                "revert_in_flight": lambda: revert_in_flight(db, home, sizes["in_flight"], points),
            }
            if not args.quick:
                scenarios["database_faults"] = lambda: database_faults(db, home, args.data)
                scenarios["postgres_restart"] = lambda: postgres_restart(db, home, args.data)
                scenarios["node_loss"] = lambda: node_loss(db, home, args.data)
            wanted = args.scenarios or list(scenarios)
            unknown = sorted(set(wanted) - set(scenarios))
            if unknown:
                parser.error(f"no scenario {', '.join(unknown)}; one of {', '.join(scenarios)}")
            for name, scenario in scenarios.items():
                if name not in wanted:
                    continue
                start = time.perf_counter()
                result = scenario()
                result.seconds = round(time.perf_counter() - start, 1)
                figures[name] = asdict(result)
                reset(db)
        # the server and its warden end now, not within seconds: nothing writes in the
        # folder while it is removed
        if postmaster_pid(settings.pgdata) is not None:
            stop_embedded(settings.pgdata, force=True)
        stop_warden(settings.pgdata)
    figures["all_clean"] = all(
        f["lost_episodes"] == f["duplicate_facts"] == f["differ_from_clean"] == 0
        and f["broken_invariants"] == 0
        and f["left_behind"] == f["helpers_left"] == 0
        and (name in CHARGING or f["episodes_charged"] == 0)
        for name, f in figures.items()
        if isinstance(f, dict)
    )
    print_figures(figures, as_json=args.json)


# ── helpers ─────────────────────────────────────────────────────────────────────────────


def reset(db: Any) -> None:
    with db.connection() as conn:
        conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")


def tally(db: Any, scenario: Scenario, clean: Any | None = None) -> None:
    """Count what the database holds now into ``scenario`` (one case)."""
    from tests.reliability.fix_outcome import (
        broken_invariants,
        duplicate_facts,
        lost_episodes,
        outcome,
    )

    with db.connection() as conn:
        scenario.cases += 1
        scenario.lost_episodes += lost_episodes(conn)
        scenario.duplicate_facts += duplicate_facts(conn)
        scenario.broken_invariants += len(broken_invariants(conn))
        if clean is not None and outcome(conn) != clean:
            scenario.differ_from_clean += 1
        (runs,) = conn.execute("SELECT count(*) FROM consolidation_runs").fetchone()
        scenario.runs += int(runs)
        (held,) = conn.execute(
            "SELECT count(*) FROM episodic_memory WHERE quarantined_at IS NOT NULL"
        ).fetchone()
        scenario.quarantined_episodes += int(held)
        (charged,) = conn.execute(
            "SELECT count(*) FROM episodic_memory WHERE attempts > 0"
        ).fetchone()
        scenario.episodes_charged += int(charged)


def stories(db: Any, conversations: int) -> None:
    from slowwave.tasks.ingest.load import load_episodes
    from tests.reliability.fix_commands import story_episodes

    with db.connection() as conn:
        load_episodes(conn, story_episodes(conversations))


def consolidate_commands(db: Any, home: Path, model: Any = None, *, named: bool = False) -> Any:
    """A backfill-style run of the stories; ``named``: naming every pending conversation, as a
    run asked for explicitly (it passes every fault point of a run, ``close.after`` first)."""
    from slowwave.tasks.consolidate import consolidate
    from tests.reliability.crash_child import pending_conversations, settings_for
    from tests.reliability.fix_commands import CommandModel, HashEmbedder

    return consolidate(
        db,
        model or CommandModel(),
        HashEmbedder(),
        settings_for(db.url, home),
        kind="backfill",
        conversations=pending_conversations(db) if named else None,
    )


def clean_outcome(db: Any, home: Path, conversations: int) -> Any:
    from tests.reliability.fix_outcome import outcome

    stories(db, conversations)
    consolidate_commands(db, home)
    with db.connection() as conn:
        seen = outcome(conn)
    reset(db)
    return seen


# ── the scenarios ───────────────────────────────────────────────────────────────────────


def crash(db: Any, home: Path, conversations: int, points: tuple[str, ...]) -> Scenario:
    from tests.reliability.fix_crash import hit_for, kill_with_helpers_at

    clean = clean_outcome(db, home, conversations)
    scenario = Scenario()
    for point in points:
        stories(db, conversations)
        said, started, left = kill_with_helpers_at(db, home, point, hit_for(point))
        scenario.helpers_started += started
        scenario.helpers_left += left
        if said != f"AT {point}":
            raise RuntimeError(f"the child did not stop at {point}: {said}")
        consolidate_commands(db, home)
        tally(db, scenario, clean)
        reset(db)
    return scenario


def concurrency(db: Any, home: Path, runs: int, conversations: int) -> Scenario:
    from tests.reliability.fix_crash import run_at_once

    clean = clean_outcome(db, home, conversations)
    stories(db, conversations)
    run_at_once(db, home, runs, conversations // runs)
    scenario = Scenario()
    tally(db, scenario, clean)
    return scenario


def overtaken(db: Any, home: Path, conversations: int) -> Scenario:
    from slowwave.models import faultpoints

    clean = clean_outcome(db, home, conversations)
    stories(db, conversations)

    def stall_past_the_lease(point: str, _: object) -> None:
        with db.connection() as conn:
            conn.execute(
                "UPDATE episodic_memory SET claimed_until = now() - interval '1 second' "
                "WHERE claimed_by IS NOT NULL"
            )
        consolidate_commands(db, home)

    faultpoints.arm("model.answered", stall_past_the_lease)
    try:
        consolidate_commands(db, home)
    finally:
        faultpoints.disarm()
    scenario = Scenario()
    tally(db, scenario, clean)
    return scenario


def model_faults(db: Any, home: Path, healthy: int) -> Scenario:
    """Each fault in Ivo's conversation while ``healthy`` others go on; the faulty run again
    until the fault's chunk is applied or quarantined."""
    from slowwave.models.errors import RuntimeUnreachable
    from slowwave.models.settings import setting_default
    from slowwave.tasks.ingest.load import load_episodes
    from tests.reliability.fix_commands import START, said, story_episodes
    from tests.reliability.fix_faults import FAULTS, FaultyModel
    from tests.reliability.test_model_faults import KNOWN

    attempts = setting_default("max_attempts")
    scenario = Scenario()
    for fault in [*FAULTS, "engine_dies"]:
        with db.connection() as conn:
            load_episodes(conn, said("ivo", *KNOWN, day=0))
        consolidate_commands(db, home)
        with db.connection() as conn:
            load_episodes(conn, said("ivo", f"fault: {fault}", day=1))
            load_episodes(conn, story_episodes(healthy, start=START + timedelta(days=2)))
        for _ in range(attempts):
            try:
                consolidate_commands(db, home, FaultyModel())
            except RuntimeUnreachable:  # the engine is back for the next run
                consolidate_commands(db, home)
        tally(db, scenario)
        reset(db)
    return scenario


def injection(db: Any, home: Path, conversations: int) -> Scenario:
    """Every conversation's facts, then a line that makes the model invalidate them all."""
    from slowwave.tasks.ingest.load import load_episodes
    from tests.reliability.fix_commands import INJECTION, said
    from tests.reliability.test_hostile import FACTS

    with db.connection() as conn:
        for c in range(conversations):
            load_episodes(conn, said(f"victim-{c}", *FACTS))
    consolidate_commands(db, home)
    with db.connection() as conn:
        for c in range(conversations):
            load_episodes(conn, said(f"victim-{c}", INJECTION, day=1))
    consolidate_commands(db, home)
    scenario = Scenario()
    tally(db, scenario)
    with db.connection() as conn:
        (ended,) = conn.execute(
            "SELECT count(*) FROM semantic_memory WHERE invalid_at IS NOT NULL"
        ).fetchone()
    scenario.differ_from_clean = int(ended)  # a clean outcome here ends nothing
    return scenario


def forget_in_flight(db: Any, home: Path, conversations: int, points: tuple[str, ...]) -> Scenario:
    """At every fault point: ``conversations`` stories and a secret one, a forget of the secret
    one while the run is held there."""
    from slowwave.tasks.forget import forget_conversation
    from slowwave.tasks.ingest.load import load_episodes
    from tests.fix_forget import columns_holding, new_marker
    from tests.reliability.fix_crash import hit_for
    from tests.reliability.fix_in_flight import arrive_during
    from tests.reliability.test_forget_in_flight import secret_conversation

    clean = clean_outcome(db, home, conversations)  # of the stories alone
    scenario = Scenario()
    for point in points:
        marker = new_marker()
        secret, episodes = secret_conversation(marker)
        stories(db, conversations)
        with db.connection() as conn:
            load_episodes(conn, episodes)
        arrival = arrive_during(
            point,
            hit_for(point),
            lambda: consolidate_commands(db, home, named=True),
            partial(forget_conversation, db, secret, home=home, by="bench", reason="erasure"),
        )
        scenario.operation_s_max = max(
            scenario.operation_s_max, round(arrival.seconds_after_release, 2)
        )
        with db.connection() as conn:
            scenario.left_behind += len(columns_holding(conn, marker))
            scenario.left_behind += len(columns_holding(conn, secret))
        tally(db, scenario, clean)
        reset(db)
    return scenario


def revert_in_flight(db: Any, home: Path, conversations: int, points: tuple[str, ...]) -> Scenario:
    """At every fault point: a run holding the later days of ``conversations`` stories while
    the run that consolidated their first days is reverted; then a rerun."""
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.revert import RevertRefused, revert_run
    from tests.reliability.fix_commands import story_episodes
    from tests.reliability.fix_crash import hit_for
    from tests.reliability.fix_in_flight import arrive_during

    clean = clean_outcome(db, home, conversations)
    everything = story_episodes(conversations)
    first_days = [e for e in everything if e.start_at.day < 4]
    scenario = Scenario()
    for point in points:
        with db.connection() as conn:
            load_episodes(conn, first_days)
        first = consolidate_commands(db, home)
        with db.connection() as conn:
            load_episodes(conn, everything)

        def revert_first(run_id: Any = first.run_id) -> Any:
            with db.connection() as conn:
                try:
                    return revert_run(conn, run_id, by="bench", reason="prompt bug")
                except RevertRefused as exc:
                    return exc

        arrival = arrive_during(
            point,
            min(hit_for(point), 2),
            lambda: consolidate_commands(db, home, named=True),
            revert_first,
        )
        scenario.operation_s_max = max(
            scenario.operation_s_max, round(arrival.seconds_after_release, 2)
        )
        if isinstance(arrival.operation, RevertRefused):
            scenario.operations_refused += 1
            with db.connection() as conn:
                revert_run(conn, first.run_id, by="bench", reason="prompt bug", cascade=True)
        consolidate_commands(db, home)
        tally(db, scenario, clean)
        reset(db)
    return scenario


@contextmanager
def flow_environment(home: Path, data: Path) -> Iterator[None]:
    """The nightly flow reads its settings from the environment, as a deployment does."""
    from prefect.testing.utilities import prefect_test_harness

    from slowwave.models.settings import get_settings

    values = {
        "SLOWWAVE_HOME": str(home),
        "SLOWWAVE_LLM_RUNTIME": "replay",
        "SLOWWAVE_REPLAY_DATA": str(data),
    }
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    get_settings.cache_clear()
    try:
        with prefect_test_harness(server_startup_timeout=120):
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        get_settings.cache_clear()


def database_faults(db: Any, home: Path, data: Path) -> Scenario:
    """The connection dropped mid-apply and at COMMIT, a COMMIT whose confirmation was lost."""
    from tests.reliability.test_database_faults import lose_confirmation, terminate

    return _flow_faults(
        db,
        home,
        data,
        [
            ("apply.insert_facts.after", terminate(db), 2),
            ("apply.write_log.before", terminate(db), 2),
            ("commit.before", terminate(db), 2),
            ("commit.after", lose_confirmation, 2),
        ],
    )


def postgres_restart(db: Any, home: Path, data: Path) -> Scenario:
    """The server itself restarted (``pg_ctl restart -m fast``) under an open apply, and while
    the shard's claim is being taken."""
    from tests.reliability.test_database_faults import restart_server

    return _flow_faults(
        db,
        home,
        data,
        [
            ("apply.insert_facts.after", restart_server(db), 2),
            ("commit.before", restart_server(db), 2),
            ("claim.before", restart_server(db), 1),
        ],
    )


def _clean_flow_outcome(db: Any, data: Path, conversations: list[str] | None) -> Any:
    """What an undisturbed in-process run of the replay model makes of what is pending."""
    from slowwave.models.embedding import load_embedder
    from slowwave.models.llm.replay import LoCoMoReplayModel
    from slowwave.models.settings import get_settings
    from slowwave.tasks.consolidate import consolidate
    from tests.reliability.fix_outcome import outcome

    settings = get_settings()
    embedder = load_embedder(settings)
    try:
        consolidate(db, LoCoMoReplayModel(data), embedder, settings, conversations=conversations)
    finally:
        embedder.close()
    with db.connection() as conn:
        return outcome(conn)


def _flow_faults(
    db: Any, home: Path, data: Path, faults: list[tuple[str, Callable[[str, Any], None], int]]
) -> Scenario:
    """The nightly flow on one conversation with each fault armed at its point and hit; every
    run must complete and end as a clean run."""
    from slowwave.flows.consolidate import nightly
    from slowwave.models import faultpoints
    from slowwave.models.settings import get_settings
    from tests.fix_locomo import locomo_subset
    from tests.reliability.test_database_faults import CONVERSATION, ingest_one

    scenario = Scenario()
    one = locomo_subset(home, CONVERSATION, source=data)  # alone: nothing else left pending
    with flow_environment(home, data):
        settings = get_settings()
        ingest_one(db, settings, one)
        clean = _clean_flow_outcome(db, data, [CONVERSATION])
        reset(db)
        for point, fault, hit in faults:
            ingest_one(db, settings, one)
            faultpoints.arm(point, fault, at_hit=hit)
            try:
                state = nightly(conversations=[CONVERSATION], return_state=True)
            finally:
                faultpoints.disarm()
            if not state.is_completed():
                raise RuntimeError(f"the nightly flow failed at {point}: {state.message}")
            tally(db, scenario, clean)
            reset(db)
    return scenario


def node_loss(db: Any, home: Path, data: Path) -> Scenario:
    """The nightly flow on a local Ray cluster of two nodes, every conversation a shard; once
    three shards have started, every process of the second node killed (SIGKILL, as a lost
    machine); the node started again and the flow run again: the end state a clean run's."""
    from benchmarks.local_cluster import local_ray_cluster, shared_token_env
    from slowwave.flows.consolidate import nightly
    from slowwave.models.settings import get_settings
    from slowwave.tasks.ingest.policy import IngestPolicy
    from slowwave.tasks.ingest.transcripts import ingest
    from tests.test_cluster import lose_node_once_started

    scenario = Scenario()
    os.environ.update(shared_token_env())
    with flow_environment(home, data), local_ray_cluster(nodes=2, cpus_per_node=4) as cluster:
        settings = get_settings()
        ingest(db, data, IngestPolicy.of(settings))
        clean = _clean_flow_outcome(db, data, None)
        reset(db)
        ingest(db, data, IngestPolicy.of(settings))
        cluster_env = {
            "SLOWWAVE_RAY_ADDRESS": cluster.address,
            "SLOWWAVE_EMBEDDING_ACTORS_PER_NODE": "1",
            "SLOWWAVE_SHARD_CONCURRENCY": "4",
            "SLOWWAVE_SHARD_CONVERSATIONS": "1",
        }
        os.environ.update(cluster_env)
        get_settings.cache_clear()
        try:
            watcher = lose_node_once_started(db, cluster, node=1)
            nightly(return_state=True)  # ends failed when a shard was lost: counted below
            watcher.join(timeout=130)
            cluster.start_node()
            state = nightly(return_state=True)
            if not state.is_completed():
                raise RuntimeError(f"the run after the node came back failed: {state.message}")
        finally:
            for key in cluster_env:
                os.environ.pop(key, None)
            get_settings.cache_clear()
        tally(db, scenario, clean)
    return scenario


if __name__ == "__main__":
    main()
