"""The settings as one Markdown table, made from ``Settings`` (the documentation site's
settings reference, and ``slowwave settings --markdown``), so that it cannot drift."""

from __future__ import annotations

from pathlib import Path

from pydantic.fields import FieldInfo

from slowwave.models.settings import variables


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: FieldInfo) -> str:
    default = field.get_default(call_default_factory=True)
    if default is None:
        return "unset"
    if isinstance(default, Path):
        return f"`{default.as_posix()}`"
    return f"`{default}`"


def settings_markdown() -> str:
    """One table: every variable, where it is in ``Settings`` (its group), its default and its
    meaning, group by group."""
    lines = ["| variable | in `Settings` | default | meaning |", "|---|---|---|---|"]
    for place, names, field in variables():
        shown = " / ".join(f"`{n}`" for n in names)
        lines.append(
            f"| {shown} | `{place}` | {_default(field)} | {cell(field.description or '')} |"
        )
    return "\n".join(lines)
