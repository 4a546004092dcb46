"""Vector search scoped to one conversation: exact scan vs HNSW with iterative scans.

Fills a fresh database with C conversations of several sizes (random unit vectors), builds an
HNSW index the way a deployment that wanted one would (slowwave's schema has none: no
statement it runs would use it), then for queries against conversations of each size times,
side by side in one run:

- exact:  ``cosine_distance()`` over the conversation's rows (what slowwave's search and
          predict run: the partial index finds the rows, every distance is computed);
- hnsw:   ``ORDER BY embedding <=> q`` filtered to the conversation with pgvector's
          ``hnsw.iterative_scan = strict_order`` (the index walks on until enough rows of the
          conversation are found);

and reports the HNSW answer's recall@k against the exact one.

    python -m benchmarks.search_scope [--sizes 50 500 5000] [--others 40000] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

import numpy as np

from benchmarks.homes import fresh_home
from slowwave.models.processes import unwind_on_sigterm

EXACT = """
SELECT id FROM semantic_memory
WHERE conversation_id = %(c)s AND invalid_at IS NULL
ORDER BY cosine_distance(embedding, %(q)s), id LIMIT %(k)s
"""
HNSW = """
SELECT id FROM semantic_memory
WHERE conversation_id = %(c)s AND invalid_at IS NULL
ORDER BY embedding <=> %(q)s LIMIT %(k)s
"""


def fill(conn: Any, conversation: str, count: int, rng: np.random.Generator) -> None:
    from tests.fix_facts import copy_facts

    vectors = rng.standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows: list[tuple[str, str, list[str]]] = [("interest", f"fact {i}", []) for i in range(count)]
    copy_facts(conn, conversation, rows, vectors, datetime(2024, 1, 1, tzinfo=UTC))


def main() -> None:
    unwind_on_sigterm()  # a stopped benchmark stops the servers it started
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[50, 500, 5000])
    parser.add_argument("--others", type=int, default=40000, help="facts of other conversations")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--json", action="store_true", help="end with one line of JSON")
    args = parser.parse_args()

    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate

    rng = np.random.default_rng(7)
    figures: dict[str, Any] = {"others": args.others, "k": args.k}
    with tempfile.TemporaryDirectory(prefix="slowwave-scope-") as home:
        settings = Settings(home=fresh_home(home), _env_file=None)
        with Database(settings) as db:
            migrate(db)
            with db.connection() as conn:
                per_other = 500
                for i in range(args.others // per_other):
                    fill(conn, f"other-{i}", per_other, rng)
                for size in args.sizes:
                    fill(conn, f"size-{size}", size, rng)
                conn.execute(
                    "CREATE INDEX IF NOT EXISTS bench_embedding_hnsw ON semantic_memory "
                    "USING hnsw (embedding vector_cosine_ops)"
                )
                conn.execute("ANALYZE semantic_memory")
                for size in args.sizes:
                    exact_ms, hnsw_ms, recalls = [], [], []
                    for _ in range(args.queries):
                        q = rng.standard_normal(384).astype(np.float32)
                        q /= np.linalg.norm(q)
                        params = {"c": f"size-{size}", "q": q, "k": args.k}
                        start = time.perf_counter()
                        exact = [r[0] for r in conn.execute(EXACT, params).fetchall()]
                        exact_ms.append((time.perf_counter() - start) * 1000)
                        with conn.transaction():
                            conn.execute("SET LOCAL hnsw.iterative_scan = strict_order")
                            start = time.perf_counter()
                            approx = [r[0] for r in conn.execute(HNSW, params).fetchall()]
                            hnsw_ms.append((time.perf_counter() - start) * 1000)
                        recalls.append(len(set(exact) & set(approx)) / max(len(exact), 1))
                    figures[str(size)] = {
                        "exact_ms": round(statistics.median(exact_ms), 2),
                        "hnsw_iterative_ms": round(statistics.median(hnsw_ms), 2),
                        "hnsw_recall_at_k": round(statistics.mean(recalls), 4),
                    }
    print(f"other conversations' facts: {args.others}, k = {args.k}")
    print(f"{'facts in conversation':>22} {'exact ms':>9} {'hnsw ms':>9} {'hnsw recall':>12}")
    for size in args.sizes:
        row = figures[str(size)]
        print(
            f"{size:>22} {row['exact_ms']:>9} {row['hnsw_iterative_ms']:>9} "
            f"{row['hnsw_recall_at_k']:>12}"
        )
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
