"""Where an export goes, and how its files land there: a folder or an object store (a pyarrow
filesystem), each partition's file whole or absent (written aside and moved into place), and
the manifest of what the export holds beside them. Only files named as an export names them
(``PARTITION``) are read, moved or removed.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from slowwave.models.errors import ExportError

logger = logging.getLogger(__name__)

MANIFEST = "_slowwave_export.json"
ASIDE = "_slowwave_tmp"  # files being written, before they are moved into place
FORMAT = 2  # the manifest's and the files' layout; another one is rewritten whole
PART = "part-0.parquet"
# the files an export writes, and the manifest's keys: nothing else is read, moved or removed
PARTITION = re.compile(
    r"(facts|versions|decisions|episodes)/tenant=[a-z0-9][a-z0-9_-]{0,62}/"
    r"day=\d{4}-\d{2}-\d{2}/part-0\.parquet|runs/day=\d{4}-\d{2}-\d{2}/part-0\.parquet"
)


@dataclass(frozen=True)
class Target:
    """Where an export goes: a pyarrow filesystem and the root on it."""

    url: str  # what is registered: an absolute local path, or the URL
    filesystem: Any
    root: str

    @classmethod
    def of(cls, to: str | Path) -> Target:
        from pyarrow import fs

        text = str(to)
        if "://" not in text:
            path = Path(text).expanduser().resolve()
            return cls(str(path), fs.LocalFileSystem(), path.as_posix())
        parts = urlsplit(text)
        if parts.scheme != "s3":
            raise ExportError(f"{text}: export to a folder or an s3:// URL")
        if parts.username or parts.password:
            raise ExportError(
                "an export URL holds no credentials (slowwave records where it exported): "
                "give them as AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        if parts.query or parts.fragment or not parts.netloc:
            raise ExportError(f"{text}: give s3://bucket or s3://bucket/prefix, nothing more")
        url = f"s3://{parts.netloc}{parts.path.rstrip('/')}"
        filesystem, root = fs.FileSystem.from_uri(url)
        return cls(url, filesystem, root.rstrip("/"))

    @property
    def local(self) -> bool:
        return not self.url.startswith("s3://")

    def path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def read_manifest(self) -> dict[str, Any]:
        try:
            with self.filesystem.open_input_stream(self.path(MANIFEST)) as stream:
                manifest = json.loads(stream.read().decode())
        except FileNotFoundError:
            return {}
        except OSError as exc:  # an object store says "not found" its own way
            if "not exist" in str(exc).lower() or "not found" in str(exc).lower():
                return {}
            raise
        except ValueError:
            logger.warning("%s: unreadable manifest, every partition is rewritten", self.url)
            return {}
        return manifest if isinstance(manifest, dict) else {}

    def write_manifest(self, partitions: dict[str, Any]) -> None:
        manifest = {"format": FORMAT, "partitions": partitions}
        with self._written(MANIFEST) as stream:
            stream.write(json.dumps(manifest, indent=1, sort_keys=True).encode())

    @contextmanager
    def _written(self, relative: str) -> Iterator[Any]:
        """An output stream for a file that is whole or not there: written aside (outside the
        datasets) and moved into place only once it was written to the end; a failure leaves
        the old file as it was. On an object store the move is a copy made by the store."""
        folder = self.path(ASIDE)
        if self.local:
            self.filesystem.create_dir(folder, recursive=True)
            self.filesystem.create_dir(self.path(relative).rsplit("/", 1)[0], recursive=True)
        aside = f"{folder}/{uuid.uuid4().hex}"
        with self.filesystem.open_output_stream(aside) as stream:
            yield stream
        self.filesystem.move(aside, self.path(relative))

    def files(self, prefix: str) -> set[str]:
        """The partition files under ``prefix``, relative to the root: only names an export
        writes (an analyst's own file beside them is left alone)."""
        from pyarrow import fs

        selector = fs.FileSelector(self.path(prefix), allow_not_found=True, recursive=True)
        infos = self.filesystem.get_file_info(selector)
        start = len(self.root) + 1
        return {
            i.path[start:]
            for i in infos
            if i.type == fs.FileType.File and PARTITION.fullmatch(i.path[start:])
        }

    def exists(self, relative: str) -> bool:
        from pyarrow import fs

        return bool(self.filesystem.get_file_info(self.path(relative)).type == fs.FileType.File)

    def delete(self, relative: str) -> None:
        """A partition's file, and the folders it leaves empty (an object store keeps a
        marker for each)."""
        from pyarrow import fs

        self.filesystem.delete_file(self.path(relative))
        folder = self.path(relative).rsplit("/", 1)[0]
        while folder != self.root and not self.filesystem.get_file_info(
            fs.FileSelector(folder, allow_not_found=True)
        ):
            self.filesystem.delete_dir(folder)
            folder = folder.rsplit("/", 1)[0]

    @contextmanager
    def partition_writer(self, relative: str, schema: Any) -> Iterator[Any]:
        """A writer of one partition's file, which is whole or not there at all."""
        import pyarrow.parquet as pq

        with (
            self._written(relative) as stream,
            pq.ParquetWriter(stream, schema, compression="zstd") as writer,
        ):
            yield writer

    def clear_aside(self) -> None:
        """What an export that stopped left aside."""
        from pyarrow import fs

        folder = self.path(ASIDE)
        if self.filesystem.get_file_info(folder).type == fs.FileType.Directory:
            self.filesystem.delete_dir(folder)


def partition(name: str, tenant: str | None, day: date) -> str:
    """A partition's file, relative to the export's root."""
    tenant_part = f"tenant={tenant}/" if tenant is not None else ""
    return f"{name}/{tenant_part}day={day.isoformat()}/{PART}"
