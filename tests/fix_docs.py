"""The code blocks of the documentation's tutorials and how-to guides, run as a reader runs
them: in order, in a fresh folder (its own ``./.slowwave``), with a test double for the
language model and nothing of this test session's environment.

A page's blocks run one after another: ``bash`` in bash with ``set -euo pipefail`` (the
variables a block sets are there for the next, as in one terminal), ``python`` in a fresh
interpreter, ``json`` parsed (and an MCP configuration connected to: the stdio command started
with its environment, the HTTP URL with its header). ``text`` and unlabelled blocks are output
and are not run. An HTML comment right above a block changes how it runs:

- ``<!-- docs-test: background URL -->``: the block is a server, started in the background
  and waited for until URL answers 200; stopped with Ctrl-C (SIGINT) when the page ends;
- ``<!-- docs-test: skip: REASON -->``: not run, for the reason given (it must give one).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from slowwave.models.processes import answers
from tests.fix_processes import with_prepared_embedder

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN = ("bash", "python", "json")
OUTPUT = ("text", "console", "")
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
DIRECTIVE = re.compile(r"<!-- docs-test: (?P<directive>.*?) -->")
PLACEHOLDER_KEY = "sw_…"
DOCUMENTED_PORT = "127.0.0.1:8765"
DOCUMENTED_FOLDER = "/home/you/memory"  # the reader's folder, where the pages say a path


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    directive: str | None

    @property
    def where(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the directive written right above it."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        directive = DIRECTIVE.fullmatch(before.strip())
        found.append(
            Block(
                page,
                text.count("\n", 0, match.start()) + 1,
                match["lang"],
                match["code"],
                directive["directive"] if directive else None,
            )
        )
    return found


def build_site(site: Path) -> None:
    """``mkdocs build --strict`` of this checkout into ``site``."""
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-5000:]


def runnable_pages() -> list[Path]:
    return sorted((DOCS / "tutorials").glob("*.md")) + sorted((DOCS / "how-to").glob("*.md"))


def reader_env(folder: Path, **extra: str) -> dict[str, str]:
    """A login's environment: no slowwave, Prefect or database variables; the installed
    commands first on PATH; Prefect's home in the folder."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLOWWAVE_", "PREFECT_")) and not k.endswith("DATABASE_URL")
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PREFECT_HOME"] = str(folder / ".prefect")
    with_prepared_embedder(folder / ".slowwave")  # what the skipped `models setup` makes
    return {**env, **extra}


_KEEP_VARIABLES = r"""
for __v in $(compgen -v); do
  case "$__v" in
    __*|BASH*|FUNCNAME|PIPESTATUS|GROUPS|DIRSTACK|EUID|PPID|UID|SHELLOPTS) continue;;
    RANDOM|LINENO|SECONDS|SRANDOM|EPOCH*|_) continue;;
  esac
  grep -qxF "$__v" <<<"$__before" || declare -p "$__v"
done >> "$__state"
"""


class PageRun:
    """One page's blocks, run in order in ``folder`` with ``env``."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = env
        self.state = folder / ".docs-test-variables"
        self.state.touch()
        self.servers: list[tuple[subprocess.Popen[bytes], Path]] = []

    def run(self, block: Block) -> None:
        if block.directive and block.directive.startswith("skip"):
            reason = block.directive.removeprefix("skip").strip(" :")
            assert reason, f"{block.where}: a skipped block must say why"
            return
        if block.lang in OUTPUT:
            return
        assert block.lang in RUN, f"{block.where}: a block in {block.lang!r}, which no one runs"
        if block.directive and block.directive.startswith("background"):
            assert block.lang == "bash", f"{block.where}: only a bash block runs in the background"
            self._background(block, block.directive.removeprefix("background").strip())
        elif block.directive is not None:
            raise AssertionError(f"{block.where}: unknown directive {block.directive!r}")
        elif block.lang == "bash":
            self._bash(block)
        elif block.lang == "python":
            self._python(block)
        else:
            self._json(block)

    def _script(self, code: str) -> str:
        return (
            f'set -euo pipefail\n__state="{self.state}"\nsource "$__state"\n'
            f"__before=$(compgen -v)\n{code}\n{_KEEP_VARIABLES}"
        )

    def _bash(self, block: Block) -> None:
        self._finished(block, ["bash", "-c", self._script(block.code)])

    def _python(self, block: Block) -> None:
        self._finished(block, [sys.executable, "-c", block.code])

    def _finished(self, block: Block, command: list[str]) -> None:
        done = subprocess.run(
            command,
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 0, (
            f"{block.where}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )

    def _background(self, block: Block, url: str) -> None:
        url = re.sub(r"\$\{(\w+)\}", lambda m: self.env[m.group(1)], url)
        log = self.folder / f".docs-test-server-{len(self.servers)}.log"
        with log.open("wb") as out:
            server = subprocess.Popen(
                ["bash", "-c", self._script(block.code)],
                cwd=self.folder,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: Ctrl-C reaches all of it
            )
        self.servers.append((server, log))
        deadline = time.monotonic() + 240
        while not answers(url):
            tail = log.read_text(errors="replace")[-3000:]
            assert server.poll() is None, f"{block.where}: exited {server.returncode}\n{tail}"
            assert time.monotonic() < deadline, f"{block.where}: {url} never answered\n{tail}"
            time.sleep(0.5)

    def variable(self, name: str) -> str:
        done = subprocess.run(
            ["bash", "-c", f'source "{self.state}"; printf %s "${{{name}:-}}"'],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout

    def _json(self, block: Block) -> None:
        try:
            document = json.loads(block.code)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"{block.where}: not JSON: {exc}") from None
        for name, server in document.get("mcpServers", {}).items():
            tools = anyio.run(self._mcp_tools, server)
            assert "search_memory" in tools, f"{block.where}: {name} lists {tools}"

    async def _mcp_tools(self, server: dict[str, Any]) -> list[str]:
        from mcp import Client, StdioServerParameters

        key = self.variable("KEY")
        assert key, "an MCP configuration is checked with the key a block before it made ($KEY)"
        text = json.dumps(server, ensure_ascii=False).replace(PLACEHOLDER_KEY, key)
        text = text.replace(DOCUMENTED_PORT, f"127.0.0.1:{self.env['SLOWWAVE_SERVE_PORT']}")
        text = text.replace(DOCUMENTED_FOLDER, str(self.folder))
        server = json.loads(text)
        if "command" in server:
            command = shutil.which(server["command"], path=self.env["PATH"])
            assert command, f"no {server['command']} on PATH"
            target: Any = StdioServerParameters(
                command=command,
                args=server.get("args", []),
                # started elsewhere, as a desktop agent starts it: the page's env must say
                # where the memory is
                env={**self.env, **server.get("env", {})},
                cwd=self.folder.parent,
            )
            async with Client(target) as client:
                listed = await client.list_tools()
                await client.call_tool("search_memory", {"conversation_id": "x", "query": "x"})
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            async with (
                httpx2.AsyncClient(headers=server.get("headers", {}), timeout=60) as web,
                Client(streamable_http_client(server["url"], http_client=web)) as client,
            ):
                listed = await client.list_tools()
                await client.call_tool("search_memory", {"conversation_id": "x", "query": "x"})
        return sorted(t.name for t in listed.tools)

    def stop(self) -> None:
        """Ctrl-C to every server the page started (their own process groups), then SIGKILL
        to any that did not stop within a minute."""
        for server, _ in self.servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGINT)
        for server, log in self.servers:
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(10)
                raise AssertionError(
                    f"a server did not stop on Ctrl-C\n{log.read_text(errors='replace')[-2000:]}"
                ) from None


@contextmanager
def page_run(folder: Path, env: dict[str, str]) -> Iterator[PageRun]:
    run = PageRun(folder, env)
    try:
        yield run
    finally:
        run.stop()
