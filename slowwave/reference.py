"""The generated reference of the documentation site: the settings, the command line, the REST
API and the MCP tools, each made from the code that defines it (``Settings``, the Typer app,
the OpenAPI document, the MCP server's tool list) when the site is built, so none of them can
drift from what runs. ``docs/hooks.py`` puts them where a page says ``<!-- generated: NAME
-->``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from slowwave.models.settings import Settings
from slowwave.models.settings.table import cell, settings_markdown


def cli_markdown() -> str:
    """Every command of ``slowwave``, with its arguments, options and example, as Typer's own
    documentation generator writes them (the page's title is the page's)."""
    import typer
    from typer.cli import get_docs_for_click

    from slowwave.cli import app

    command = typer.main.get_command(app)
    context = typer.Context(command)
    text = get_docs_for_click(obj=command, ctx=context, name="slowwave")
    return text.split("\n", 1)[1].strip()  # its first line is a title of its own


def openapi_document() -> dict[str, Any]:
    """The server's OpenAPI document, with the default settings' limits."""
    from slowwave.server.app import create_app

    return create_app(Settings(), mcp=False).openapi()


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    if "anyOf" in schema:
        return " or ".join(_schema_type(s) for s in schema["anyOf"])
    if schema.get("type") == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def rest_markdown() -> str:
    """Every route of the REST API: its parameters, body and answers, from the OpenAPI
    document the server serves (``/openapi.json``; the site carries a copy beside this
    page)."""
    document = openapi_document()
    out: list[str] = []
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            out += [f"## `{method.upper()} {path}`", ""]
            if operation.get("description") or operation.get("summary"):
                out += [cell(operation.get("description") or operation["summary"]), ""]
            parameters = operation.get("parameters", [])
            if parameters:
                out += ["| parameter | in | type | required | meaning |", "|---|---|---|---|---|"]
                for p in parameters:
                    meaning = cell(
                        p.get("description") or p.get("schema", {}).get("description", "")
                    )
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {_schema_type(p.get('schema', {}))}"
                        f" | {'yes' if p.get('required') else 'no'} | {meaning} |"
                    )
                out.append("")
            body = operation.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                out += [f"Body (`{media}`): {_schema_type(content.get('schema', {}))}", ""]
            out += ["| status | meaning |", "|---|---|"]
            for status, answer in operation.get("responses", {}).items():
                out.append(f"| {status} | {cell(answer.get('description', ''))} |")
            out.append("")
    return "\n".join(out).strip()


def mcp_markdown() -> str:
    """Every MCP tool with its description and parameters, from the server's tool list."""
    from slowwave.server.mcp import build_server

    server = build_server(lambda: None, lambda ctx: None)  # type: ignore[arg-type,return-value]
    tools = asyncio.run(server.list_tools())
    out: list[str] = []
    for tool in tools:
        out += [f"## `{tool.name}`", "", cell(tool.description or ""), ""]
        schema = tool.input_schema
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        if properties:
            out += ["| parameter | type | required | default |", "|---|---|---|---|"]
            for name, prop in properties.items():
                default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
                out.append(
                    f"| `{name}` | {_schema_type(prop)} | {'yes' if name in required else 'no'}"
                    f" | {default} |"
                )
            out.append("")
    return "\n".join(out).strip()


def errors_markdown() -> str:
    """Every error code, from the one list (``slowwave.errors.classes()``): its status, its
    class and what it means; a class that narrows another's code in process (``UnknownFact``
    is a ``not_found``) is named beside the code's own."""
    from slowwave import errors

    codes = errors.by_code()
    narrower: dict[str, list[str]] = {}
    for cls in errors.classes():
        if codes.get(cls.code) is not cls:
            narrower.setdefault(cls.code, []).append(cls.__name__)
    out = [
        "| code | status | class | is a | what it means |",
        "|---|---|---|---|---|",
    ]
    for code, cls in sorted(codes.items()):
        parent = next(
            (b.__name__ for b in cls.__mro__[1:] if issubclass(b, errors.SlowwaveError)), ""
        )
        doc = " ".join((cls.__doc__ or "").split())
        also = narrower.get(code)
        if also:
            doc += " In process, narrowed as " + ", ".join(f"`{n}`" for n in also) + "."
        out.append(
            f"| `{code}` | {cls.status} | `{cls.__name__}` | "
            f"{f'`{parent}`' if parent else ''} | {cell(doc)} |"
        )
    return "\n".join(out)


GENERATED: dict[str, Callable[[], str]] = {
    "errors": errors_markdown,
    "settings": settings_markdown,
    "cli": cli_markdown,
    "rest": rest_markdown,
    "mcp": mcp_markdown,
}
