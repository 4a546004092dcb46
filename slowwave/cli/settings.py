"""`slowwave settings`: every setting, its value and where it came from."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from slowwave.cli.render import console
from slowwave.models.settings import get_settings, variables
from slowwave.models.settings.table import settings_markdown


def show_settings(
    markdown: Annotated[
        bool,
        typer.Option(
            "--markdown",
            help="The documented table of every setting (the site's settings reference).",
        ),
    ] = False,
) -> None:
    """Show the effective settings (secrets hidden), or document them all.

    Example: SLOWWAVE_CHUNK_SIZE=4 slowwave settings"""
    if markdown:
        typer.echo(settings_markdown())
        return
    values: dict[str, Any] = json.loads(get_settings().model_dump_json())
    for place, names, _ in variables():
        group, _, field = place.rpartition(".")
        value = values[group][field] if group else values[field]
        console.print(f"{names[0]} = {value}", highlight=False)
