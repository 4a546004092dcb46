"""The warden of an embedded Postgres (``sql.db.embedded``): stops the server once no live
process holds it, then exits.

    python -m slowwave.sql.db.warden PGDATA

Started by the first holder of a data directory (``embedded.start_warden``), in a session of
its own. It looks every ``POLL_S``, under the lock holders join by: a holder killed with
SIGKILL is pruned, and when none is left the server is stopped (a holder that exits cleanly
stops it itself, and the warden finds nothing running).
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from slowwave.sql.db.embedded import (
    holders_locked,
    live_holders,
    postmaster_pid,
    stop_embedded_locked,
    warden_file,
)

log = logging.getLogger(__name__)

POLL_S = 1.0


def watch_holders(pgdata: Path) -> None:
    """Until no live process holds the server of ``pgdata``; then stop it if it runs."""
    while True:
        time.sleep(POLL_S)
        with holders_locked(pgdata):
            if live_holders(pgdata):
                continue
            if postmaster_pid(pgdata) is not None:
                log.warning("no live process holds the embedded Postgres %s: stopping it", pgdata)
                stop_embedded_locked(pgdata)
            warden_file(pgdata).unlink(missing_ok=True)
            return


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    watch_holders(Path(sys.argv[1]))
