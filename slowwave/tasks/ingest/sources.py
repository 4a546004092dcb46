"""Where a source's files are: one file, a folder (every transcript file under it, at any
depth), or a glob (``chats/2023-*.parquet``, ``lake/**/*.csv``), in name order; local, or on
an object store (``s3://bucket/prefix/``, ``s3://bucket/2023/*.parquet``).

An object store is reached with the AWS SDK's own settings, which pyarrow (listing, JSONL)
and polars (Parquet, CSV) both read: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, and ``AWS_ENDPOINT_URL`` for an S3-compatible store other than AWS's.

A folder holds the rejects reports of earlier runs (``*.rejects.jsonl``) beside its files:
they are never read back as a source.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import io
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from slowwave.models.errors import EmptySource

# what a folder or a glob is read for: LoCoMo's .json documents only as a file of their own
SUFFIXES = frozenset({".jsonl", ".ndjson", ".parquet", ".pq", ".csv", ".tsv"})
REJECTS_SUFFIX = ".rejects.jsonl"
GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class RemoteFile:
    """A file on an object store."""

    url: str  # s3://bucket/key
    size: int

    @property
    def name(self) -> str:
        return PurePosixPath(self.url).name

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.url).suffix

    def open(self, mode: str = "rb") -> IO[bytes]:
        if mode != "rb":
            raise ValueError("an object is opened for reading, in binary")
        filesystem, path = _filesystem(self.url)
        return io.BufferedReader(filesystem.open_input_stream(path))

    def __str__(self) -> str:
        return self.url


SourceFile = Path | RemoteFile
REMOTE_SCHEMES = ("s3://",)


def file_size(file: SourceFile) -> int:
    return file.size if isinstance(file, RemoteFile) else file.stat().st_size


def remote(source: str) -> bool:
    return source.startswith(REMOTE_SCHEMES)


def _filesystem(url: str) -> tuple[Any, str]:
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(url)
    return filesystem, path


def remote_input(url: str) -> Any:
    """An object opened for random access (a Parquet reader seeks to the footer first)."""
    filesystem, path = _filesystem(url)
    return filesystem.open_input_file(path)


def source_files(source: str) -> list[SourceFile]:
    """The files ``source`` names: itself, a folder's transcript files, or a glob's."""
    if remote(source):
        return _remote_files(source)
    path = Path(source)
    if path.is_file():
        return [path]
    if path.is_dir():
        found: list[SourceFile] = [p for p in sorted(path.rglob("*")) if _transcript(p)]
        if not found:
            raise EmptySource(f"no transcript file in {source} ({', '.join(sorted(SUFFIXES))})")
        return found
    if GLOB_CHARS & set(source):
        matched = [Path(p) for p in sorted(glob.glob(source, recursive=True))]
        found = [p for p in matched if _transcript(p)]
        if not found:
            raise EmptySource(f"no file matches {source}")
        return list(found)
    raise FileNotFoundError(f"no such file or folder: {source}")


def _remote_files(source: str) -> list[SourceFile]:
    """An object, every transcript object under a prefix, or the objects a glob matches."""
    from pyarrow import fs

    scheme, _, rest = source.partition("://")
    parts = rest.split("/")
    fixed = _fixed_parts(parts)
    root = "/".join(parts[:fixed]).rstrip("/")
    filesystem, _ = _filesystem(f"{scheme}://{root}")
    if fixed == len(parts):
        info = filesystem.get_file_info(root)
        if info.type == fs.FileType.File:
            return [RemoteFile(source, int(info.size or 0))]
        if info.type != fs.FileType.Directory:
            raise FileNotFoundError(f"no such object or prefix: {source}")
    listed = filesystem.get_file_info(fs.FileSelector(root, recursive=True))
    found: list[SourceFile] = []
    for info in sorted(listed, key=lambda i: i.path):
        if info.type != fs.FileType.File or not _transcript(PurePosixPath(info.path), local=False):
            continue
        if fixed < len(parts) and not _glob_match(info.path.split("/"), parts):
            continue
        found.append(RemoteFile(f"{scheme}://{info.path}", int(info.size or 0)))
    if not found:
        raise EmptySource(f"no transcript file in {source}")
    return found


def _transcript(path: Path | PurePosixPath, *, local: bool = True) -> bool:
    """A transcript file by its name: a known suffix, not hidden (an editor's or a copy
    tool's ``._chats.parquet``), not a rejects report."""
    return (
        (not local or Path(path).is_file())
        and path.suffix.lower() in SUFFIXES
        and not path.name.startswith(".")
        and not path.name.endswith(REJECTS_SUFFIX)
    )


def sources_report_path(source: str, home: Path) -> Path:
    """The one rejects report of a folder or a glob: beside the folder when it can be written
    there, else under the slowwave home, named after the source's folder (before any glob)
    and a digest of the whole source."""
    if not remote(source):
        folder = Path(source).resolve()
        if folder.is_dir() and folder.parent != folder and os.access(folder.parent, os.W_OK):
            return folder.with_name(folder.name + REJECTS_SUFFIX)
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    parts = Path(source).parts
    fixed = _fixed_parts(list(parts))
    name = parts[fixed - 1].strip("/") if fixed else ""
    return home / "rejects" / f"{name or 'source'}-{digest}{REJECTS_SUFFIX}"


def _fixed_parts(parts: list[str]) -> int:
    """How many of a path's parts come before the first that holds a glob character."""
    return next((i for i, part in enumerate(parts) if GLOB_CHARS & set(part)), len(parts))


def _glob_match(keys: list[str], parts: list[str]) -> bool:
    """A key's parts match a glob's as a path does: ``*`` within one part, ``**`` any number
    of whole parts."""
    if not parts:
        return not keys
    if parts[0] == "**":
        return any(_glob_match(keys[i:], parts[1:]) for i in range(len(keys) + 1))
    return (
        bool(keys) and fnmatch.fnmatchcase(keys[0], parts[0]) and _glob_match(keys[1:], parts[1:])
    )
