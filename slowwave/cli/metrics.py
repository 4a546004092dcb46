"""`slowwave metrics`: decision metrics in the Prometheus text format."""

from __future__ import annotations

from typing import Annotated

import typer

from slowwave.cli.common import one_line_errors
from slowwave.cli.render import console
from slowwave.metrics import metrics_text, serve_metrics
from slowwave.service import Service


@one_line_errors
def metrics_command(
    serve: Annotated[
        bool, typer.Option("--serve", help="Serve them on 127.0.0.1 for a scraper until stopped.")
    ] = False,
    port: Annotated[
        int | None, typer.Option("--port", help="With --serve (default SLOWWAVE_METRICS_PORT).")
    ] = None,
) -> None:
    """Decision metrics of every finished run, in the Prometheus text format.

    Example: slowwave metrics > /var/lib/node_exporter/slowwave.prom"""
    with Service.open() as service:
        db = service.db
        if not serve:
            typer.echo(metrics_text(db), nl=False)
            return
        port = port or db.settings.orchestration.metrics_port
        server, thread = serve_metrics(db, port)
        console.print(f"metrics on http://127.0.0.1:{port}/metrics (Ctrl-C stops)")
        try:
            while thread.is_alive():
                thread.join(1.0)
        finally:
            server.shutdown()
            server.server_close()
