"""How a command shows its result: the consoles, ``--json`` output, and tables that fit a
terminal of 80 columns and use one of 200."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.table import Column, Table

console = Console()
errors = Console(stderr=True)


def emit(data: Any, as_json: bool, show: Callable[[], None]) -> None:
    """A command's result: as JSON (``--json``: dataclasses and pydantic models as their
    fields, ids and times as strings), or shown for a person by ``show``."""
    if not as_json:
        show()
        return
    typer.echo(json.dumps(_jsonable(data), indent=2, default=str))


def _jsonable(data: Any) -> Any:
    if hasattr(data, "model_dump"):
        return data.model_dump(mode="json")
    if is_dataclass(data) and not isinstance(data, type):
        return _jsonable(asdict(data))
    if isinstance(data, dict):
        return {str(k): _jsonable(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_jsonable(v) for v in data]
    return data


def table(*columns: Column | str, title: str | None = None) -> Table:
    """A table that fits 80 columns and uses 200: no frame, two spaces between columns, text
    wrapped within its column (never cut with an ellipsis). Ids and numbers go in
    ``id_column`` and ``number_column``: never wrapped, never shrunk below their width."""
    return Table(
        *columns,
        title=title,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1, 0, 0),  # with the frame's blank, two spaces between columns
        title_justify="left",
        caption_justify="left",
    )


def id_column(header: str, width: int = 7) -> Column:
    """A column of (short) ids: whole, whatever the terminal's width, so they can be copied
    into the commands that take them."""
    return Column(header, no_wrap=True, min_width=max(width, len(header)), overflow="ignore")


def number_column(header: str) -> Column:
    return Column(header, no_wrap=True, justify="right", min_width=len(header))


def text_column(header: str, *, ratio: int = 1) -> Column:
    """Free text (a fact, an error): takes the room left, wrapped, folded inside long words."""
    return Column(header, ratio=ratio, overflow="fold")
