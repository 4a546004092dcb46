"""Ingestion: transcripts and LoCoMo into episodes, validated, idempotent, in event time."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from slowwave.models.embedding.base import Embedder
from slowwave.models.ids import conversation_ref
from slowwave.models.llm.replay import LoCoMoReplayModel
from slowwave.models.settings import Settings
from slowwave.sql.db import Database
from slowwave.tasks.consolidate import consolidate
from slowwave.tasks.ingest.policy import IngestPolicy
from slowwave.tasks.ingest.transcripts import ingest
from tests.fix_episodes import with_settings

T0 = datetime(2023, 3, 1, 9, 0, tzinfo=UTC)


def message(
    conversation: str, mid: str, minutes: float, text: str = "", **extra: Any
) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "message_id": mid,
        "timestamp": (T0 + timedelta(minutes=minutes)).isoformat(),
        "speaker": "user",
        "text": text or f"Message {mid} about the garden and the weekend.",
        **extra,
    }


def write_jsonl(path: Path, rows: list[dict[str, Any] | str | bytes]) -> Path:
    with path.open("wb") as out:
        for row in rows:
            if isinstance(row, bytes):
                out.write(row + b"\n")
            elif isinstance(row, str):
                out.write(row.encode() + b"\n")
            else:
                out.write(json.dumps(row).encode() + b"\n")
    return path


def episodes_of(conn: psycopg.Connection, conversation: str) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT external_key, jsonb_array_length(messages), start_at, end_at, consolidated_at "
        "FROM episodic_memory WHERE conversation_id = %s ORDER BY start_at",
        (conversation,),
    ).fetchall()


def test_locomo_ingests_into_187_episodes_at_their_own_2023_times_and_once_only(
    db: Database, conn: psycopg.Connection, settings: Settings, locomo_path: Path
) -> None:
    first = ingest(db, locomo_path, IngestPolicy.of(settings))
    assert (first.episodes, first.ingested, first.rejected) == (187, 4124, 0)
    assert ingest(db, locomo_path, IngestPolicy.of(settings)).episodes == 0
    row = conn.execute(
        "SELECT start_at, summary IS NOT NULL, jsonb_array_length(messages) FROM episodic_memory "
        "WHERE external_key = 'locomo:conv-26:session_1'"
    ).fetchone()
    assert row == (datetime(2023, 5, 8, 13, 56, tzinfo=UTC), True, 18)
    (count_2023,) = conn.execute(
        "SELECT count(*) FROM episodic_memory WHERE extract(year FROM start_at) = 2023"
    ).fetchone()  # type: ignore[misc]
    assert count_2023 == 122


@pytest.mark.slow
def test_a_locomo_backfill_yields_facts_valid_in_their_own_time_not_today(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    locomo_path: Path,
) -> None:
    ingest(db, locomo_path, IngestPolicy.of(settings))
    consolidate(db, LoCoMoReplayModel(locomo_path), embedder, settings, conversations=["conv-26"])
    (latest,) = conn.execute(
        "SELECT max(valid_at) FROM semantic_memory WHERE conversation_id = 'conv-26'"
    ).fetchone()  # type: ignore[misc]
    assert latest.year == 2023
    assert latest < datetime.now(UTC) - timedelta(days=365)


@pytest.mark.slow
def test_an_episodes_words_for_search_are_parsed_when_it_is_consolidated_not_at_ingest(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    locomo_path: Path,
) -> None:
    """Search reads an episode's words only through the facts that cite it, and a pending
    episode has none: ingest leaves them to the chunk that applies it, in its transaction."""
    ingest(db, locomo_path, IngestPolicy.of(settings))
    words = (
        "SELECT count(*) FILTER (WHERE search_tsv IS NOT NULL),"
        " count(*) FILTER (WHERE consolidated_at IS NOT NULL AND search_tsv IS DISTINCT FROM"
        "   to_tsvector('english', jsonb_path_query_array(messages, '$[*].text'))),"
        " count(*) FILTER (WHERE consolidated_at IS NOT NULL)"
        " FROM episodic_memory WHERE conversation_id = 'conv-26'"
    )
    assert conn.execute(words).fetchone() == (0, 0, 0)
    consolidate(db, LoCoMoReplayModel(locomo_path), embedder, settings, conversations=["conv-26"])
    parsed, wrong, consolidated = conn.execute(words).fetchone()  # type: ignore[misc]
    assert consolidated > 0 and parsed >= consolidated and wrong == 0
    (cited_without,) = conn.execute(
        "SELECT count(*) FROM semantic_memory f JOIN episodic_memory e"
        " ON e.id = f.source_episodic_ids[1] WHERE e.search_tsv IS NULL"
    ).fetchone()  # type: ignore[misc]
    assert cited_without == 0


def test_transcripts_are_segmented_by_time_gaps_sessions_and_size(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    tuned = with_settings(settings, segment_gap_s=3600, segment_max_messages=3)
    rows: list[dict[str, Any] | str | bytes] = [
        # a gap of 2 hours splits; 4 messages in a burst are cut at 3
        message("gaps", "1", 0),
        message("gaps", "2", 1),
        message("gaps", "3", 121),
        message("gaps", "4", 122),
        message("gaps", "5", 123),
        message("gaps", "6", 124),
        # sessions given by the source win over time gaps
        message("sessions", "a", 0, session_id="s1"),
        message("sessions", "b", 500, session_id="s1"),
        message("sessions", "c", 501, session_id=2),
    ]
    report = ingest(db, write_jsonl(tmp_path / "t.jsonl", rows), IngestPolicy.of(tuned))
    assert (report.read, report.ingested, report.rejected, report.episodes) == (9, 9, 0, 5)
    assert [(k, n) for k, n, *_ in episodes_of(conn, "gaps")] == [
        ("gaps:1", 2),
        ("gaps:3", 3),
        ("gaps:6", 1),
    ]
    assert [(k, n) for k, n, *_ in episodes_of(conn, "sessions")] == [
        ("sessions:a", 2),
        ("sessions:c", 1),
    ]
    (_, _, start, end, _) = episodes_of(conn, "gaps")[1]
    assert (start, end) == (T0 + timedelta(minutes=121), T0 + timedelta(minutes=123))


def test_a_grown_source_adds_only_new_episodes_and_never_rewrites_consolidated_ones(
    db: Database,
    conn: psycopg.Connection,
    settings: Settings,
    embedder: Embedder,
    tmp_path: Path,
) -> None:
    path = tmp_path / "grow.jsonl"
    rows: list[dict[str, Any] | str | bytes] = [message("g", str(i), i * 90) for i in range(6)]
    write_jsonl(path, rows)
    assert ingest(db, path, IngestPolicy.of(settings)).episodes == 6
    assert ingest(db, path, IngestPolicy.of(settings)).episodes == 0, "re-ingesting adds nothing"

    from tests.fix_models import ScriptedModel

    consolidate(db, ScriptedModel(), embedder, settings)
    before = episodes_of(conn, "g")
    assert all(e[4] is not None for e in before)

    # the source grew: a message that continues the last episode, and a later one
    write_jsonl(path, [*rows, message("g", "6", 5 * 90 + 5), message("g", "7", 2000)])
    grown = ingest(db, path, IngestPolicy.of(settings))
    assert (grown.ingested, grown.episodes) == (2, 2)
    after = episodes_of(conn, "g")
    assert after[: len(before)] == before, "consolidated episodes are untouched"
    assert [(k, n) for k, n, *_ in after[len(before) :]] == [("g:6", 1), ("g:7", 1)]


def test_parquet_transcripts_ingest_and_zoneless_timestamps_are_rejected(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    zoned = pa.table(
        {
            "conversation_id": ["p", "p", "p"],
            "message_id": ["1", "2", "3"],
            "timestamp": pa.array(
                [T0, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)],
                type=pa.timestamp("us", tz="UTC"),
            ),
            "role": ["user", "assistant", "user"],
            "text": ["I moved to Lisbon in March.", "How do you like it?", ""],
        }
    )
    pq.write_table(zoned, tmp_path / "zoned.parquet")
    report = ingest(db, tmp_path / "zoned.parquet", IngestPolicy.of(settings))
    assert (report.read, report.ingested, report.rejected, report.episodes) == (3, 2, 1, 1)
    assert report.first_rejects[0].line == 3 and "text: is empty" in report.first_rejects[0].reason

    naive = zoned.set_column(
        2, "timestamp", pa.array([T0.replace(tzinfo=None)] * 3, type=pa.timestamp("us"))
    )
    pq.write_table(naive, tmp_path / "naive.parquet")
    bad = ingest(db, tmp_path / "naive.parquet", IngestPolicy.of(settings))
    assert (bad.ingested, bad.rejected) == (0, 3)
    assert "no time zone" in bad.first_rejects[0].reason


def test_every_kind_of_bad_line_is_reported_with_file_line_and_reason(
    db: Database, settings: Settings, tmp_path: Path
) -> None:
    small = with_settings(settings, max_message_chars=100)
    rows: list[dict[str, Any] | str | bytes] = [
        message("v", "1", 0),
        "{not json",
        {k: v for k, v in message("v", "2", 1).items() if k != "text"},
        message("v", "3", 2, text=" "),
        {**message("v", "4", 3), "timestamp": "2023-03-01T09:00:00"},
        {**message("v", "5", 4), "timestamp": "last tuesday"},
        b'{"conversation_id": "v", "message_id": "6", "text": "\xc3\x28"}',
        message("v", "7", 5, text="x" * 101),
        message("v", "1", 6),
        {**message("v", "8", 7), "speaker": 42},
        "[1, 2, 3]",
        "",
        message("v", "9", 8),
    ]
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    report = ingest(db, path, IngestPolicy.of(small))
    reasons = {r.line: r.reason for r in report.first_rejects}
    assert set(reasons) == {2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
    assert reasons[2].startswith("malformed JSON")
    assert reasons[3] == "text: Field required"
    assert reasons[4] == "text: is empty"
    assert reasons[5] == "timestamp: Input should have timezone info"
    assert reasons[6].startswith("timestamp: Input should be a valid datetime")
    assert reasons[7].startswith("invalid UTF-8")
    assert reasons[8] == "text: 101 characters, more than the limit of 100"
    # a reason names a conversation by reference: it may reach Prefect's artifacts
    assert reasons[9] == f"duplicate message_id '1' in {conversation_ref('v')} (first on line 1)"
    assert reasons[10] == "speaker: must be a string, not int"
    assert reasons[11] == "not a JSON object"
    assert (report.ingested, report.rejected) == (2, 10)
    written = [
        json.loads(line) for line in Path(report.rejects_path or "").read_text().splitlines()
    ]
    assert {w["line"] for w in written} == set(reasons)
    assert all(w["source"] == str(path) for w in written)


# ── property: whatever the mix, bad lines are reported and good lines land ─────

GOOD = st.builds(
    lambda mid, minutes, text: ("good", mid, minutes, text),
    st.integers(0, 10_000),
    st.floats(0, 10_000, allow_nan=False),
    st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=80).filter(
        lambda t: t.strip() != ""
    ),
)
BAD = st.one_of(
    st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b.strip() != b""),
    st.sampled_from(
        [
            "{",
            "null",
            '"text"',
            '{"conversation_id": 1}',
            '{"conversation_id": "x", "message_id": "m", "timestamp": "2023-01-01", '
            '"speaker": "u", "text": "zone-less"}',
            '{"conversation_id": "x", "message_id": [1], "timestamp": "2023-01-01T00:00:00Z", '
            '"speaker": "u", "text": "list id"}',
        ]
    ),
)


@hsettings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(lines=st.lists(st.one_of(GOOD, BAD), min_size=1, max_size=40))
def test_generated_malformed_transcripts_never_crash_and_lose_no_good_line(
    db: Database, settings: Settings, tmp_path_factory: Any, lines: list[Any]
) -> None:
    conversation = f"h-{uuid.uuid4()}"
    rows: list[dict[str, Any] | str | bytes] = []
    good_ids: dict[str, int] = {}
    expected_bad: set[int] = set()
    for number, item in enumerate(lines, start=1):
        if isinstance(item, tuple):
            _, mid, minutes, text = item
            rows.append(message(conversation, str(mid), minutes, text=text))
            if str(mid) in good_ids:
                expected_bad.add(number)  # a repeated id: the first line wins
            else:
                good_ids[str(mid)] = number
        else:
            rows.append(item)
            try:
                parsed = json.loads(item.decode() if isinstance(item, bytes) else item)
                is_good = isinstance(parsed, dict) and parsed.get("conversation_id") == conversation
            except (UnicodeDecodeError, ValueError):
                is_good = False
            blank = (
                item.decode(errors="replace") if isinstance(item, bytes) else item
            ).strip() == ""
            if not is_good and not blank:
                expected_bad.add(number)
    path = write_jsonl(tmp_path_factory.mktemp("hyp") / "t.jsonl", rows)
    report = ingest(db, path, IngestPolicy.of(settings))

    reported = (
        {json.loads(x)["line"] for x in Path(report.rejects_path).read_text().splitlines()}
        if report.rejects_path
        else set()
    )
    assert reported == expected_bad
    with db.connection() as conn:
        landed = {
            r[0]
            for r in conn.execute(
                "SELECT message_id FROM ingested_messages WHERE conversation_id = %s",
                (conversation,),
            ).fetchall()
        }
    assert landed == set(good_ids)


def test_episodes_without_a_summary_get_one_from_the_model_in_batches(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    from slowwave.models.llm.base import GenerationRequest, ModelAnswer
    from slowwave.tasks.ingest.summarize import summarize_missing

    class Summarizer:
        name = "summarizer"

        def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
            answers = []
            for r in requests:
                if "Lisbon" in r.user:  # one answer the model gets wrong
                    answers.append(ModelAnswer(r.chunk_id, '{"summary": 42}'))
                else:
                    first = r.user.splitlines()[1]
                    text = json.dumps({"summary": f"The user said: {first}"})
                    answers.append(ModelAnswer(r.chunk_id, text, None, 50, 12))
            return answers

        def close(self) -> None:
            return None

    rows: list[dict[str, Any] | str | bytes] = [
        message("s", "1", 0, text="I adopted a cat called Miso."),
        message("s", "2", 300, text="I am moving to Lisbon in May."),
        message("s", "3", 600, text="Miso knocked over my plants again."),
    ]
    ingest(db, write_jsonl(tmp_path / "s.jsonl", rows), IngestPolicy.of(settings))
    report = summarize_missing(conn, Summarizer(), batch=2, min_chars=0)
    assert (report.summarized, report.failed) == (2, 1)
    assert (report.prompt_tokens, report.completion_tokens) == (100, 24)
    summaries: dict[str, str | None] = dict(
        conn.execute(
            "SELECT external_key, summary FROM episodic_memory WHERE conversation_id = 's'"
        ).fetchall()
    )
    assert summaries["s:1"] == "The user said: user: I adopted a cat called Miso."
    assert summaries["s:2"] is None, "a failed answer leaves no summary, and stops nothing"
    assert summaries["s:3"] is not None
    assert summaries["s:3"].startswith("The user said: user: Miso knocked")


def test_an_episode_no_longer_than_a_summary_is_not_summarised_and_costs_no_call(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    from slowwave.models.llm.base import GenerationRequest, ModelAnswer
    from slowwave.tasks.ingest.summarize import summarize_missing

    asked: list[str] = []

    class Summarizer:
        name = "summarizer"

        def generate(self, requests: Sequence[GenerationRequest]) -> list[ModelAnswer]:
            asked.extend(r.user for r in requests)
            text = json.dumps({"summary": "Dana told the story of her long move to Leeds."})
            return [ModelAnswer(r.chunk_id, text, None, 50, 12) for r in requests]

        def close(self) -> None:
            return None

    long_text = "I finally moved to Leeds after months of packing and goodbyes. " * 12
    rows: list[dict[str, Any] | str | bytes] = [
        message("short", "1", 0, text="Hi! I'm Dana."),
        message("short", "2", 1, text="Nice to meet you, Dana."),
        message("long", "1", 0, text=long_text),
    ]
    ingest(db, write_jsonl(tmp_path / "s.jsonl", rows), IngestPolicy.of(settings))
    report = summarize_missing(conn, Summarizer(), min_chars=settings.ingest.summary_min_chars)
    assert (report.summarized, report.failed, report.short) == (1, 0, 1)
    assert len(asked) == 1 and "Leeds" in asked[0], "the short episode cost no model call"
    summaries: dict[str, str | None] = dict(
        conn.execute("SELECT conversation_id, summary FROM episodic_memory").fetchall()
    )
    assert summaries == {
        "short": None,
        "long": "Dana told the story of her long move to Leeds.",
    }


def test_a_nul_character_or_a_lone_surrogate_rejects_its_line_and_the_rest_lands(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    def row(i: int, text: str, speaker: str = "user") -> dict[str, Any]:
        return {
            "conversation_id": "h",
            "message_id": i,
            "timestamp": f"2024-05-01T10:0{i}:00+00:00",
            "speaker": speaker,
            "text": text,
        }

    path = write_jsonl(
        tmp_path / "hostile.jsonl",
        [
            row(1, "A perfectly ordinary first message."),
            row(2, "a NUL \u0000 inside"),
            '{"conversation_id": "h", "message_id": 3, "timestamp": '
            '"2024-05-01T10:03:00+00:00", "speaker": "\\ud800", "text": "lone surrogate"}',
            '{"conversation_id": "h", "message_id": "\\udfff", "timestamp": '
            '"2024-05-01T10:04:00+00:00", "speaker": "user", "text": "odd id"}',
            row(6, "A perfectly ordinary last message."),
        ],
    )
    report = ingest(db, path, IngestPolicy.of(settings))
    assert (report.read, report.ingested, report.rejected) == (5, 2, 3)
    reasons = {r.line: r.reason for r in report.first_rejects}
    assert "NUL character" in reasons[2]
    assert all("unicode" in reasons[n].lower() for n in (3, 4)), reasons
    stored = conn.execute("SELECT count(*) FROM ingested_messages").fetchone()
    assert stored == (2,)


@pytest.mark.slow
def test_a_file_with_more_conversations_than_the_server_can_lock_at_once_lands_whole(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    # each conversation is held against a forget while it is written: one advisory lock each,
    # and the server's lock table has room for max_locks_per_transaction × connections
    (room,) = conn.execute(  # type: ignore[misc]
        "SELECT current_setting('max_locks_per_transaction')::int "
        "* (current_setting('max_connections')::int "
        "+ current_setting('max_prepared_transactions')::int)"
    ).fetchone()
    conversations = 3 * room  # far more than it has room for
    source = tmp_path / "many.jsonl"
    at = datetime(2024, 5, 1, 9, tzinfo=UTC).isoformat()
    source.write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": f"c{i:06d}",
                    "message_id": "1",
                    "timestamp": at,
                    "speaker": "user",
                    "text": f"Message of conversation {i}.",
                }
            )
            + "\n"
            for i in range(conversations)
        )
    )

    report = ingest(db, source, IngestPolicy.of(with_settings(settings, summarize_on_ingest=False)))

    assert (report.ingested, report.episodes) == (conversations, conversations)
    (stored,) = conn.execute(  # type: ignore[misc]
        "SELECT count(DISTINCT conversation_id) FROM episodic_memory"
    ).fetchone()
    assert stored == conversations
    again = ingest(db, source, IngestPolicy.of(with_settings(settings, summarize_on_ingest=False)))
    assert again.ingested == 0


def _source_of_many(path: Path, conversations: list[str], per: int, first: int = 0) -> Path:
    """``per`` messages of each conversation, 7 minutes apart, the conversations interleaved
    as a lake's files hold them."""
    rows: list[dict[str, Any] | str | bytes] = [
        message(c, str(i), 7 * i) for i in range(first, first + per) for c in conversations
    ]
    return write_jsonl(path, rows)


def _landed(conn: psycopg.Connection) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every episode and every ingested message (by its episode's key), in key order."""
    episodes = conn.execute(
        "SELECT external_key, messages, start_at, end_at FROM episodic_memory ORDER BY 1"
    ).fetchall()
    messages = conn.execute(
        "SELECT m.conversation_id, m.message_id, e.external_key FROM ingested_messages m "
        "LEFT JOIN episodic_memory e ON e.id = m.episode_id ORDER BY 1, 2"
    ).fetchall()
    return episodes, messages


def _many_groups(monkeypatch: Any, size: int) -> None:
    from slowwave.tasks.ingest import segment

    monkeypatch.setattr(segment, "GROUP_CONVERSATIONS", size)


def test_a_source_of_many_conversations_lands_on_two_connections_at_once_as_on_one(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path, monkeypatch: Any
) -> None:
    import threading

    from slowwave.tasks.forget import forget_conversation
    from slowwave.tasks.ingest import segment as segment_module

    _many_groups(monkeypatch, 4)  # groups of 4 conversations on one connection, 2 on two
    gone = f"gone-{uuid.uuid4().hex[:8]}"
    base = with_settings(settings, summarize_on_ingest=False)
    ingest(db, _source_of_many(tmp_path / "gone.jsonl", [gone], 1), IngestPolicy.of(base))
    forget_conversation(db, gone, home=settings.home, by="test", reason="a tombstone", purge=False)
    names = [f"c{n:02d}" for n in range(15)]
    earlier = _source_of_many(tmp_path / "earlier.jsonl", names[:4], 3)  # open tails to grow
    source = _source_of_many(tmp_path / "lake.jsonl", [*names, gone], 6, first=3)
    with source.open("a") as out:  # a repeated message id: the first line wins
        out.write(json.dumps(message("c05", "4", 999, "the same id again")) + "\n")

    def run(connections: int) -> tuple[Any, ...]:
        conn.execute("TRUNCATE episode_windows, episodic_memory, ingested_messages")
        ingest(db, earlier, IngestPolicy.of(with_settings(base, ingest_connections=1)))
        backends.clear()
        policy = IngestPolicy.of(with_settings(base, ingest_connections=connections))
        report = ingest(db, source, policy)
        rejects = sorted((r.line, r.reason) for r in report.first_rejects)
        counts = (report.read, report.ingested, report.rejected, report.episodes, report.grown)
        return counts, rejects, _landed(conn)

    both = threading.Barrier(2, timeout=30)
    backends: set[int] = set()
    one = run(1)
    segment = segment_module._segment

    def at_once(conn: psycopg.Connection, *args: Any) -> None:
        writer = threading.current_thread() is not threading.main_thread()
        if writer and conn.info.backend_pid not in backends:
            backends.add(conn.info.backend_pid)
            both.wait()  # passes only while two groups are being written at the same time
        segment(conn, *args)

    monkeypatch.setattr(segment_module, "_segment", at_once)
    two = run(2)

    assert len(backends) == 2
    assert two == one
    counts, rejects, (episodes, messages) = two
    read, ingested, rejected, made, grown = counts
    assert (read, ingested, rejected, grown) == (15 * 6 + 6 + 1, 15 * 6, 7, 4)
    assert len(episodes) == 4 + made  # the earlier source's four, grown, and the new ones
    assert [line for line, reason in rejects if "forgotten" in reason] == [
        16 * i + 16 for i in range(6)
    ]
    assert any("duplicate message_id '4'" in reason for _, reason in rejects)
    assert all(key is not None for _, _, key in messages), "every message names its episode"
    assert len(messages) == 4 * 3 + 15 * 6


def test_a_run_stopped_after_a_group_and_run_again_ends_as_a_clean_run(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path, monkeypatch: Any
) -> None:
    import pytest

    from slowwave.models import faultpoints

    _many_groups(monkeypatch, 4)  # 32 conversations: in groups of 2 on each of two connections
    source = _source_of_many(tmp_path / "lake.jsonl", [f"c{n:02d}" for n in range(32)], 5)
    policy = IngestPolicy.of(with_settings(settings, summarize_on_ingest=False))
    assert policy.connections == 2
    ingest(db, source, policy)
    clean = _landed(conn)
    conn.execute("TRUNCATE episode_windows, episodic_memory, ingested_messages")

    class Stopped(Exception):
        pass

    def stop(point: str, _: object) -> None:
        faultpoints.arm(point, stop)  # the other connection stops after its group, too
        raise Stopped(point)

    faultpoints.arm("ingest.group.committed", stop, at_hit=3)
    try:
        with pytest.raises(Stopped):
            ingest(db, source, policy)
    finally:
        faultpoints.disarm()
    (landed,) = conn.execute(  # type: ignore[misc]
        "SELECT count(DISTINCT conversation_id) FROM episodic_memory"
    ).fetchone()
    # three groups and the one under way on the other connection: no group after the stop
    assert 6 <= landed <= 8
    (running,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM pg_stat_activity WHERE state <> 'idle' AND query ~ 'slowwave_ingest'"
        " AND pid <> pg_backend_pid()"
    ).fetchone()
    assert running == 0
    resumed = ingest(db, source, policy)
    assert resumed.ingested == 5 * (32 - landed)
    assert _landed(conn) == clean


def test_a_connection_a_stopped_run_left_holding_its_set_aside_rows_takes_the_next_run(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path, monkeypatch: Any
) -> None:
    # a stop can cancel the writer's own clean-up (its DROP of the set-aside rows) and send the
    # connection back to the pool with them: the next run on it must not fail for that
    _many_groups(monkeypatch, 4)
    source = _source_of_many(tmp_path / "lake.jsonl", [f"c{n:02d}" for n in range(16)], 3)
    policy = IngestPolicy.of(with_settings(settings, summarize_on_ingest=False))
    with db.connection() as first, db.connection() as second:
        for left in (first, second):
            left.execute("CREATE TEMP TABLE slowwave_ingest_aside (conversation_id text)")
        held = {first.info.backend_pid, second.info.backend_pid}
    report = ingest(db, source, policy)
    assert report.ingested == 16 * 3
    (conversations,) = conn.execute(  # type: ignore[misc]
        "SELECT count(DISTINCT conversation_id) FROM episodic_memory"
    ).fetchone()
    assert conversations == 16
    with db.connection() as again:
        assert again.info.backend_pid in held  # the run did write on a connection left so


def test_a_ctrl_c_while_a_source_is_read_on_two_connections_leaves_nothing_half_written(
    db: Database, conn: psycopg.Connection, settings: Settings, tmp_path: Path
) -> None:
    import pytest

    from slowwave.tasks.ingest.read import read_jsonl
    from slowwave.tasks.ingest.rejects import RejectsReport
    from slowwave.tasks.ingest.report import IngestReport
    from slowwave.tasks.ingest.segment import stage_and_segment

    source = _source_of_many(tmp_path / "lake.jsonl", [f"c{n:02d}" for n in range(12)], 5)
    policy = IngestPolicy.of(with_settings(settings, summarize_on_ingest=False))
    assert policy.connections == 2

    def read_then_interrupted() -> Any:
        batches = read_jsonl(source, 10, policy.ingest.max_message_chars, {})
        yield next(batches)
        yield next(batches)  # both connections have rows staged, uncommitted
        raise KeyboardInterrupt

    report = IngestReport(source=str(source), format="jsonl")
    with pytest.raises(KeyboardInterrupt), RejectsReport(None) as rejects:
        stage_and_segment(
            conn,
            read_then_interrupted(),
            str(source),
            policy,
            report,
            rejects,
            None,
            (None, None),
            db=db,
        )

    assert conn.execute("SELECT count(*) FROM episodic_memory").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM ingested_messages").fetchone() == (0,)
    (open_transactions,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM pg_stat_activity WHERE state LIKE '%%transaction%%' "
        "AND pid <> pg_backend_pid()"
    ).fetchone()
    assert open_transactions == 0
    again = ingest(db, source, policy)
    assert (again.ingested, again.rejected) == (60, 0)
