"""MkDocs hooks: the generated reference (``slowwave.reference``) goes where a page says
``<!-- generated: NAME -->``, and the OpenAPI document beside the REST reference, at every
build: nothing generated is kept in ``docs/``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from slowwave import reference

MARK = re.compile(r"<!-- generated: (\w+) -->")
README = Path(__file__).resolve().parents[1] / "README.md"


def front_page() -> str:
    """The README, whose links into ``docs/`` become the site's own."""
    text = README.read_text(encoding="utf-8")
    text = text.replace("[`docs/`](docs/)", "`docs/`")
    return re.sub(r"\]\(docs/", "](", text)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def generated(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "readme":
            return front_page()
        if name not in reference.GENERATED:
            raise ValueError(f"{page.file.src_uri}: no generated reference named {name!r}")
        return reference.GENERATED[name]()

    return MARK.sub(generated, markdown)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """The OpenAPI document the REST reference links to, made at build time."""
    document = json.dumps(reference.openapi_document(), indent=2)
    files.append(File.generated(config, "reference/openapi.json", content=document))
    return files
