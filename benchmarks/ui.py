"""The memory browser's speed: a conversation of 2,000 facts rendered in Chromium, and the
conversations page of a tenant with 100,000 conversations.

A home of its own gets one conversation of ``--facts`` active facts (eight categories, each
citing an episode) and ``--conversations`` conversations of one episode each in a tenant, by
set-based SQL; then ``slowwave serve`` on 127.0.0.1 and Debian's Chromium (Playwright), signed
in with an admin key. Each page is loaded ``--runs`` times (the first not counted): from the
browser's navigation timing, the server's answer (time to the first byte), the first
contentful paint and the page's load; the median and the worst.

Side by side in the same run: the conversations page's first page against its last (a page
is read in index order from where it starts, so the last costs what the first does).

    python -m benchmarks.ui [--facts 2000] [--conversations 100000] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.homes import fresh_home
from benchmarks.report import print_figures

TENANT = "bench"
CONVERSATION = "two-thousand"


def fill(home: Path, facts: int, conversations: int) -> None:
    """The conversation of ``facts`` facts (default tenant) and ``conversations`` of the
    bench tenant, written by SQL in a few statements."""
    from slowwave.models.settings import Settings
    from slowwave.sql.db import Database, migrate

    settings = Settings(home=home)
    with Database(settings) as db:
        migrate(db)
        dim = settings.embedding.dim
        with db.connection() as conn, conn.transaction():
            conn.execute(
                """
                INSERT INTO episodic_memory (id, conversation_id, external_key, messages,
                                             start_at, end_at, consolidated_at)
                SELECT gen_random_uuid(), %(c)s, 'bench:' || %(c)s || ':' || i,
                       jsonb_build_array(jsonb_build_object(
                           'speaker', 'user', 'text', 'Something worth remembering, ' || i)),
                       t, t, now()
                FROM generate_series(1, 200) AS i,
                     LATERAL (SELECT timestamptz '2024-01-01' + i * interval '1 day') AS d(t)
                """,
                {"c": CONVERSATION},
            )
            conn.execute(
                f"""
                INSERT INTO semantic_memory (id, conversation_id, category, fact, keywords,
                                             source_episodic_ids, valid_at, embedding)
                SELECT gen_random_uuid(), %(c)s,
                       (ARRAY['identity', 'preference', 'interest', 'personality',
                              'relationship', 'experience', 'goal', 'guideline'])[1 + i %% 8],
                       'Fact number ' || i || ' about the user, worth knowing.',
                       ARRAY['fact', 'n' || i],
                       ARRAY[(SELECT id FROM episodic_memory WHERE conversation_id = %(c)s
                              ORDER BY start_at OFFSET i %% 200 LIMIT 1)],
                       timestamptz '2024-01-01' + (i %% 200) * interval '1 day',
                       array_fill(0.01::real, ARRAY[{dim}])::vector
                FROM generate_series(1, %(n)s) AS i
                """,
                {"c": CONVERSATION, "n": facts},
            )
            conn.execute(
                """
                INSERT INTO episodic_memory (id, conversation_id, external_key, messages,
                                             start_at, end_at)
                SELECT gen_random_uuid(), %(t)s || chr(31) || 'user-' || lpad(i::text, 7, '0'),
                       'bench:' || %(t)s || ':' || i,
                       '[{"speaker": "user", "text": "hello"}]'::jsonb, now(), now()
                FROM generate_series(1, %(n)s) AS i
                """,
                {"t": TENANT, "n": conversations},
            )
        with db.connection() as conn:
            conn.execute("ANALYZE episodic_memory")
            conn.execute("ANALYZE semantic_memory")


def measure(page: Any, url: str, runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {"ttfb_ms": [], "first_paint_ms": [], "load_ms": []}
    for n in range(runs + 1):
        page.goto(url, wait_until="load")
        timing = page.evaluate(
            """() => {
                const nav = performance.getEntriesByType('navigation')[0];
                const paint = performance.getEntriesByName('first-contentful-paint')[0];
                return {ttfb: nav.responseStart - nav.startTime,
                        paint: paint ? paint.startTime : nav.loadEventEnd,
                        load: nav.loadEventEnd - nav.startTime};
            }"""
        )
        if n == 0:
            continue  # the first load warms the server's caches
        samples["ttfb_ms"].append(timing["ttfb"])
        samples["first_paint_ms"].append(timing["paint"])
        samples["load_ms"].append(timing["load"])
    return {
        **{f"{k}_median": round(statistics.median(v), 1) for k, v in samples.items()},
        **{f"{k}_max": round(max(v), 1) for k, v in samples.items()},
    }


def wait_ready(base: str) -> None:
    import httpx

    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("slowwave serve did not get ready")


def browse(base: str, key: str, conversations: int, runs: int) -> dict[str, Any]:
    """The pages' timings in Chromium, signed in with ``key``."""
    from urllib.parse import quote

    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("SLOWWAVE_CHROMIUM") or shutil.which("chromium") or "chromium"
    # Chromium makes its singleton socket under TMPDIR, and a Unix socket's path may not be
    # longer than 107 bytes: under a deep temporary folder (a test's) it aborts at start. Its
    # own TMPDIR is a short folder of this run's, removed after.
    short = tempfile.mkdtemp(prefix="sw-ui-", dir="/tmp" if os.path.isdir("/tmp") else None)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium, args=BROWSER_ARGS, env={**os.environ, "TMPDIR": short}
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{base}/ui/login")
            page.fill("#key", key)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            conversation = measure(page, f"{base}/ui/conversations/{CONVERSATION}", runs)
            rows = page.locator("tbody tr").count()
            first = measure(page, f"{base}/ui?tenant={TENANT}", runs)
            after = quote(f"{TENANT}\x1fuser-{max(conversations - 10, 0):07d}")
            last = measure(page, f"{base}/ui?tenant={TENANT}&after={after}", runs)
        finally:
            browser.close()
            shutil.rmtree(short, ignore_errors=True)
    return {"rows": rows, "conversation": conversation, "first": first, "last": last}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=2000)
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    from slowwave.models.processes import free_port, unwind_on_sigterm

    unwind_on_sigterm()  # stopped with SIGTERM, it stops its server and database as it goes

    with tempfile.TemporaryDirectory() as tmp:
        home = fresh_home(tmp)
        env = {k: v for k, v in os.environ.items() if not k.endswith("DATABASE_URL")}
        env["SLOWWAVE_HOME"] = str(home)
        cli = [sys.executable, "-m", "slowwave"]
        started = time.perf_counter()
        fill(home, args.facts, args.conversations)
        filled_s = time.perf_counter() - started
        key = subprocess.run(
            [*cli, "keys", "create", "--scope", "admin"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with (home / "serve.log").open("wb") as log:
            server = subprocess.Popen(
                [*cli, "serve", "--port", str(port)],
                env={**env, "SLOWWAVE_SERVE_RATE_PER_S": "1000"},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                wait_ready(base)
                seen = browse(base, key, args.conversations, args.runs)
            finally:
                server.terminate()
                server.wait(timeout=30)
                subprocess.run([*cli, "db", "stop"], env=env, capture_output=True, check=False)
    first, last = seen["first"], seen["last"]
    figures: dict[str, Any] = {
        "facts": args.facts,
        "conversations": args.conversations,
        "fact_rows_rendered": seen["rows"],
        "filled_s": round(filled_s, 1),
        "conversation_page": seen["conversation"],
        "conversations_first_page": first,
        "conversations_last_page": last,
        "last_over_first_ttfb": round(
            last["ttfb_ms_median"] / max(first["ttfb_ms_median"], 0.1), 2
        ),
    }
    print_figures(figures, as_json=args.json)
    return 0


BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

if __name__ == "__main__":
    raise SystemExit(main())
