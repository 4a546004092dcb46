"""Retrieval quality on LoCoMo: evidence recall@k per ranker, and dedupe quality.

Ingests and consolidates the LoCoMo conversations with the replay model (gold observations
as facts), then for every question retrieves the top-k facts of its conversation and measures
evidence recall@k (k = 5, 10, 20):

- session level: the share of the question's evidence sessions that some retrieved fact has
  as a source episode;
- turn level: the share of the question's evidence turns (``D3:7``) that some retrieved fact
  carries as evidence (the replay model's facts are gold observations, whose evidence turns
  the data set lists; a merged fact carries the evidence of every sentence merged into it);

for hybrid, vector-only and full-text-only ranking of facts; for the episodic memories a search
returns beside them (``episodes``: each counts for its session, and at turn level for the turns
its text carries within the default token budget); and for one list of both (``fused``: a fact
for its sources, an episode for its session; made, as the service makes it, of the search's k
facts and the ``SLOWWAVE_SEARCH_MEMORIES`` memories it gives); and by question category. Then dedupe
quality: every session is replayed a second time with its facts lightly reworded by a fixed
rule; the share merged into their originals and the share of distinct facts falsely merged
are reported.

With ``--rerank`` the same for the best ``SLOWWAVE_SEARCH_RERANK_CANDIDATES`` (at least 20)
facts and episodes of each search put in the order the reranker
(``SLOWWAVE_SEARCH_RERANK_MODEL``, prepared in the configured home) scores them:
``reranked_facts``, ``reranked_episodes``, and ``reranked_fused``, both lists in one by the
reranker's scores.

With ``--set max_active_facts=N`` (any setting, repeatable) the same is measured under it: a
capacity cap, a search setting. ``--conversations`` and ``--sessions`` take a part of the data
set (the first N sessions of the conversations named, and the questions whose evidence lies
wholly in them): a run in seconds that checks the harness, not figures to quote.

    python -m benchmarks.locomo_recall [--data PATH] [--conversations conv-26 ...]
        [--sessions N] [--rerank] [--set NAME=VALUE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from slowwave.models.processes import unwind_on_sigterm

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared/datasets/locomo/locomo7.json"
KS = (5, 10, 20)
RANKERS = ("hybrid", "vector", "fulltext")
LISTS = (*RANKERS, "episodes", "fused")  # what is measured: facts by ranker, memories, both
RERANKED = ("reranked_facts", "reranked_episodes", "reranked_fused")  # the same, reranked
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_TURN = re.compile(r"^D(\d+):(\d+)$")
_REWORDS = (
    (" recently ", " lately "),
    (" really ", " truly "),
    (" also ", " as well "),
    (" loves ", " adores "),
    (" likes ", " enjoys "),
)


def reword(sentence: str) -> str:
    """A light, deterministic rewording: one word swapped for a synonym, no final period."""
    text = sentence.rstrip(". ")
    for old, new in _REWORDS:
        if old in text:
            return text.replace(old, new, 1)
    return text


def setting(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` for a setting of this run (``--set``)."""
    from slowwave.models.settings import BY_NAME

    name, sep, value = text.partition("=")
    if not sep or name not in BY_NAME:
        raise argparse.ArgumentTypeError(f"not NAME=VALUE with a setting's name: {text!r}")
    if name in {"llm_model", "llm_runtime", "replay_data"}:
        raise argparse.ArgumentTypeError(f"{name} has its own flag (--model, --engine, --data)")
    return name, value


def add_set_option(parser: argparse.ArgumentParser, example: str) -> None:
    """``--set NAME=VALUE`` (repeatable): any setting for this run, parsed by ``setting``."""
    parser.add_argument(
        "--set",
        type=setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"a setting for this run, e.g. {example} (repeatable)",
    )


def normalize(sentence: str) -> str:
    return " ".join(sentence.lower().rstrip(". ").split())


def turns(evidence: Iterable[str]) -> set[str]:
    """The well-formed dialogue ids among ``evidence`` (a few in the data set are not)."""
    found = set()
    for item in evidence:
        for part in str(item).replace(",", ";").split(";"):
            part = part.strip()
            if _TURN.match(part):
                found.add(part)
    return found


def session_of(turn: str) -> int:
    match = _TURN.match(turn)
    assert match is not None
    return int(match.group(1))


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", nargs="+", default=None, metavar="SAMPLE_ID")
    parser.add_argument("--sessions", type=int, default=None, help="the first N of each")
    add_set_option(parser, "max_active_facts=150")
    parser.add_argument(
        "--retrievability-weights",
        default="0,0.1",
        help="the episodes' FSRS retrievability weights measured beside the setting's, comma "
        "separated (none: an empty string)",
    )
    parser.add_argument(
        "--rerank", action="store_true", help="also the best candidates in the reranker's order"
    )
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    from slowwave.models.embedding import load_embedder
    from slowwave.models.llm.replay import LoCoMoReplayModel
    from slowwave.models.rerank import load_reranker
    from slowwave.models.settings import Settings
    from slowwave.service.answers import fuse  # noqa: F401  (loaded now: _recall takes it)
    from slowwave.sql.db import Database, migrate
    from slowwave.tasks.consolidate import consolidate
    from slowwave.tasks.ingest.load import load_episodes
    from slowwave.tasks.ingest.locomo import read_locomo
    from slowwave.tasks.search import search

    data = json.loads(args.data.read_text(encoding="utf-8"))
    if args.conversations is not None:
        missing = set(args.conversations) - {c["sample_id"] for c in data}
        if missing:
            parser.error(f"no such conversation in {args.data}: {', '.join(sorted(missing))}")
        data = [c for c in data if c["sample_id"] in args.conversations]
    names = {c["sample_id"] for c in data}

    def episodes() -> list[Any]:
        """The chosen conversations' sessions (their first ``--sessions``)."""
        return [
            e
            for e in read_locomo(args.data)
            if e.conversation_id in names
            and (args.sessions is None or session_number(e.external_key) <= args.sessions)
        ]

    evidence_of: dict[tuple[str, str], set[str]] = defaultdict(set)  # (conv, sentence) → turns
    for conversation in data:
        for by_speaker in conversation.get("observation", {}).values():
            for items in by_speaker.values():
                for sentence, evidence in items:
                    ev = [evidence] if isinstance(evidence, str) else evidence
                    evidence_of[(conversation["sample_id"], normalize(sentence))] |= turns(ev)

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="slowwave-recall-") as home:
        configured = Settings(**dict(args.set), replay_data=args.data, _env_file=None)
        embedder = load_embedder(configured)  # a prepared model is in the configured home
        reranker = load_reranker(configured) if args.rerank else None
        settings = configured.evolve(home=Path(home), database_url=None)
        with Database(settings) as db:
            migrate(db)
            with db.connection() as conn:
                load_episodes(conn, episodes())
            first = consolidate(db, LoCoMoReplayModel(args.data), embedder, settings)
            with db.connection() as conn:
                fact_sessions, fact_turns = _fact_provenance(conn, evidence_of)
                recall, by_category, questions = _recall(
                    conn,
                    embedder,
                    (settings.search, settings.search),
                    data,
                    fact_sessions,
                    fact_turns,
                    search,
                    args.sessions,
                    [float(w) for w in args.retrievability_weights.split(",") if w],
                    reranker,
                    settings.search.rerank_candidates,
                )
                before = _fact_texts(conn)
            # dedupe quality: every session again, its facts lightly reworded
            with db.connection() as conn:
                again = [
                    e.model_copy(update={"external_key": e.external_key + ":replay"})
                    for e in episodes()
                ]
                load_episodes(conn, again)
            second = consolidate(
                db, LoCoMoReplayModel(args.data, reword=reword), embedder, settings
            )
            with db.connection() as conn:
                dedupe = _dedupe(conn, first.run_id, second.run_id, before)
    figures: dict[str, Any] = {
        **recall,
        "by_category": by_category,
        "dedupe": dedupe,
        "questions": questions,
        "facts": first.facts_inserted,
        "seconds": round(time.perf_counter() - started, 1),
    }
    _print(figures)
    if args.json:
        print(json.dumps(figures))


def _fact_provenance(
    conn: Any, evidence_of: dict[tuple[str, str], set[str]]
) -> tuple[dict[Any, set[int]], dict[Any, set[str]]]:
    """fact id → evidence sessions (its source episodes), and → evidence turns."""
    sessions = fact_sessions(conn)
    fact_turns: dict[Any, set[str]] = defaultdict(set)
    for fact_id, conversation, sentence in conn.execute(
        "SELECT fact_id, conversation_id, proposed_fact FROM decision_log "
        "WHERE action IN ('new', 'merge')"
    ):
        fact_turns[fact_id] |= evidence_of.get((conversation, normalize(sentence or "")), set())
    return sessions, fact_turns


def fact_sessions(conn: Any) -> dict[Any, set[int]]:
    """fact id → its evidence sessions: the LoCoMo sessions of its source episodes (the
    facts of other sources' episodes have none)."""
    sessions: dict[Any, set[int]] = defaultdict(set)
    for fact_id, key in conn.execute(
        "SELECT f.id, e.external_key FROM semantic_memory f "
        "JOIN episodic_memory e ON e.id = ANY(f.source_episodic_ids) "
        "WHERE e.external_key LIKE 'locomo:%'"
    ):
        sessions[fact_id].add(session_number(key))
    return sessions


def session_number(external_key: str) -> int:
    """``locomo:conv-26:session_3`` → 3 (and so for a part of it, ``…:session_3:m4``)."""
    return int(external_key.split(":")[2].removeprefix("session_"))


def session_recall(
    hits: Sequence[Any], sessions_of: dict[Any, set[int]], gold_sessions: set[int]
) -> float:
    """The share of ``gold_sessions`` that some hit has as an evidence session."""
    got: set[int] = set().union(*(sessions_of.get(h.id, set()) for h in hits))
    return len(gold_sessions & got) / len(gold_sessions)


def _recall(
    conn: Any,
    embedder: Any,
    policies: tuple[Any, Any],
    data: list[dict[str, Any]],
    fact_sessions: dict[Any, set[int]],
    fact_turns: dict[Any, set[str]],
    search: Any,
    sessions: int | None = None,
    weights: Sequence[float] = (),
    reranker: Any = None,
    rerank_candidates: int = 0,
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Recall of every question with evidence (within the first ``sessions``, when given)."""

    from slowwave.service.answers import fuse  # loaded with the rest, before any run
    from slowwave.tasks.memories import search_memories
    from slowwave.tasks.rerank import rerank

    policy, memory_policy = policies
    # the fused list is made of what the search returns: its k facts and the memories it
    # gives (``memories``, 5 by default), as the service makes it
    shown = memory_policy.memories
    lists = (*LISTS, *RERANKED) if reranker is not None else LISTS
    depth = max(max(KS), rerank_candidates)
    sessions_of, turns_of = dict(fact_sessions), dict(fact_turns)
    weighed = {w: memory_policy.model_copy(update={"retrievability_weight": w}) for w in weights}
    by_weight = {w: {n: 0.0 for n in ("episodes", "fused")} for w in weights}
    sums = {r: {lv: dict.fromkeys(KS, 0.0) for lv in ("session", "turn")} for r in lists}
    cat_sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    cat_counts: dict[str, int] = defaultdict(int)
    count = 0
    for conversation in data:
        sample = conversation["sample_id"]
        for qa in conversation["qa"]:
            gold_turns = turns(qa.get("evidence", []))
            if not gold_turns:
                continue
            gold_sessions = {session_of(t) for t in gold_turns}
            if sessions is not None and max(gold_sessions) > sessions:
                continue
            count += 1
            category = CATEGORIES.get(int(qa.get("category", 0)), "other")
            cat_counts[category] += 1
            found: dict[str, list[Any]] = {}
            deep = {"hybrid": depth if reranker is not None else max(KS)}
            for ranker in RANKERS:
                found[ranker] = search(
                    conn,
                    embedder,
                    qa["question"],
                    sample,
                    deep.get(ranker, max(KS)),
                    ranker=ranker,
                    policy=policy,
                )
            memories = search_memories(
                conn,
                embedder,
                qa["question"],
                sample,
                k=deep["hybrid"],
                memory_tokens=memory_policy.memory_tokens,
                policy=memory_policy,
            )
            for m in memories:
                sessions_of[m.id], turns_of[m.id] = _memory_evidence(conn, m)
            if reranker is not None:
                reranked = rerank(
                    reranker,
                    qa["question"],
                    found["hybrid"],
                    memories,
                    k=max(KS),
                    memories_k=max(KS),
                )
                found["reranked_facts"] = reranked.facts
                found["reranked_episodes"] = reranked.memories
                again_facts = [(h.id, h.source_episodic_ids) for h in reranked.facts]
                for k in KS:  # as the service fuses: its k facts and its memories
                    found[f"reranked_fused@{k}"] = fuse(
                        again_facts[:k], reranked.memories[:shown], k, policy.rrf_k, reranked.scores
                    )
                found["hybrid"], memories = found["hybrid"][: max(KS)], memories[: max(KS)]
            found["episodes"] = memories
            facts = [(h.id, h.source_episodic_ids) for h in found["hybrid"]]
            for k in KS:  # one list of both, cut at each k, of what a search at k returns
                found[f"fused@{k}"] = fuse(facts[:k], memories[:shown], k, policy.rrf_k)
            for w, weighed_policy in weighed.items():  # the same at other FSRS weights, @10
                again = search_memories(
                    conn,
                    embedder,
                    qa["question"],
                    sample,
                    k=10,
                    memory_tokens=memory_policy.memory_tokens,
                    policy=weighed_policy,
                )
                for m in again:
                    sessions_of[m.id], turns_of[m.id] = _memory_evidence(conn, m)
                by_weight[w]["episodes"] += session_recall(again, sessions_of, gold_sessions)
                both = fuse(facts[:10], again[:shown], 10, policy.rrf_k)
                by_weight[w]["fused"] += session_recall(both, sessions_of, gold_sessions)
            for name in lists:
                for k in KS:
                    fused = name in ("fused", "reranked_fused")
                    top = found[f"{name}@{k}"] if fused else found[name][:k]
                    got_turns = set().union(*(turns_of.get(h.id, set()) for h in top))
                    s = session_recall(top, sessions_of, gold_sessions)
                    t = len(gold_turns & got_turns) / len(gold_turns)
                    sums[name]["session"][k] += s
                    sums[name]["turn"][k] += t
                    if k == 10:
                        cat_sums[category][f"{name}_session"] += s
                        cat_sums[category][f"{name}_turn"] += t
    recall = {
        r: {
            lv: {str(k): round(v / max(count, 1), 4) for k, v in ks.items()}
            for lv, ks in levels.items()
        }
        for r, levels in sums.items()
    }
    by_category = {
        c: {
            "questions": cat_counts[c],
            **{f"{key}@10": round(v / cat_counts[c], 4) for key, v in sorted(cat_sums[c].items())},
        }
        for c in sorted(cat_counts)
    }
    recall["retrievability_weights"] = {
        str(w): {f"{n}_session@10": round(v / max(count, 1), 4) for n, v in sums_w.items()}
        for w, sums_w in by_weight.items()
    }
    return recall, by_category, count


_EPISODES: dict[Any, tuple[str, list[dict[str, Any]]]] = {}


def _memory_evidence(conn: Any, memory: Any) -> tuple[set[int], set[str]]:
    """An episodic memory's evidence: its LoCoMo session, and the turns whose lines its text
    (whole, or the excerpt within the token budget) carries."""
    if memory.id not in _EPISODES:
        key, messages = conn.execute(
            "SELECT external_key, messages FROM episodic_memory WHERE id = %s", (memory.id,)
        ).fetchone()
        _EPISODES[memory.id] = key, messages
    key, messages = _EPISODES[memory.id]
    shown = set(memory.text.splitlines())
    carried = {
        str(m.get("message_id"))
        for m in messages
        if f"{m.get('speaker', '')}: {m.get('text', '')}" in shown
    }
    return ({session_number(key)} if key.startswith("locomo:") else set()), turns(carried)


def _fact_texts(conn: Any) -> dict[Any, str]:
    return {i: normalize(t) for i, t in conn.execute("SELECT id, fact FROM semantic_memory")}


def _dedupe(conn: Any, first_run: Any, second_run: Any, texts: dict[Any, str]) -> dict[str, Any]:
    """Merges in the first pass between different sentences are false; in the replay, a
    reworded sentence should merge into the fact of its own original sentence."""
    merged_into: dict[Any, set[str]] = defaultdict(set)  # fact → sentences it absorbed
    first_false = 0
    distinct = len(set(texts.values()))
    for target, sentence in conn.execute(
        "SELECT fact_id, proposed_fact FROM decision_log WHERE run_id = %s AND action = 'merge'",
        (first_run,),
    ):
        merged_into[target].add(normalize(sentence))
        if normalize(sentence) != texts.get(target):
            first_false += 1
    replayed = merged = false = 0
    for action, target, sentence in conn.execute(
        "SELECT action, fact_id, proposed_fact FROM decision_log "
        "WHERE run_id = %s AND action IN ('new', 'merge')",
        (second_run,),
    ):
        replayed += 1
        if action != "merge":
            continue
        merged += 1
        own = {texts.get(target), *merged_into[target]}
        originals = {normalize(s) for s in own if s}
        if not any(reword(o).lower().rstrip(". ") == normalize(sentence) for o in originals):
            false += 1
    return {
        "distinct_facts": distinct,
        "first_pass_false_merges": first_false,
        "first_pass_false_merge_share": round(first_false / max(distinct, 1), 4),
        "replayed_facts": replayed,
        "replay_merged_share": round(merged / max(replayed, 1), 4),
        "replay_false_merges": false,
        "replay_false_merge_share": round(false / max(distinct, 1), 4),
    }


def _print(figures: dict[str, Any]) -> None:
    print(f"questions with evidence: {figures['questions']}, facts: {figures['facts']}")
    lists = [name for name in (*LISTS, *RERANKED) if name in figures]
    print(f"{'ranker':>17} {'level':>8} " + " ".join(f"{'@' + str(k):>7}" for k in KS))
    for ranker in lists:
        for level in ("session", "turn"):
            row = " ".join(f"{figures[ranker][level][str(k)]:>7.3f}" for k in KS)
            print(f"{ranker:>17} {level:>8} {row}")
    print("recall@10 by category (session level / turn level):")
    for category, values in figures["by_category"].items():
        cells = "  ".join(
            f"{r} {values[f'{r}_session@10']:.3f}/{values[f'{r}_turn@10']:.3f}" for r in lists
        )
        print(f"  {category:>12} ({values['questions']:>3}): {cells}")
    print("FSRS retrievability weight (session@10):", json.dumps(figures["retrievability_weights"]))
    print("dedupe:", json.dumps(figures["dedupe"]))
    print(f"took {figures['seconds']} s")


if __name__ == "__main__":
    main()
