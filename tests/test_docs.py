"""The documentation cannot go stale: the site builds with ``--strict`` (a broken link, a page
missing from the navigation, a generated reference that fails), every code block of the
tutorials and how-to guides runs as written in a fresh folder (``tests/fix_docs.py``), and the
README stays a front page."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from slowwave.models.processes import free_port
from slowwave.models.settings import variables
from tests.fix_docs import DOCS, ROOT, blocks, build_site, page_run, reader_env, runnable_pages
from tests.fix_model_server import fake_model


@pytest.mark.slow
def test_the_site_builds_strictly_with_every_page_in_its_navigation(tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(site)
    settings = (site / "reference" / "settings" / "index.html").read_text(encoding="utf-8")
    assert "SLOWWAVE_GROUNDING" in settings  # generated at build time, not kept in docs/
    assert "slowwave backfill" in (site / "reference" / "cli" / "index.html").read_text()
    assert "search_memory" in (site / "reference" / "mcp" / "index.html").read_text()
    assert (
        "/v1/conversations/{conversation_id}/search"
        in (site / "reference" / "rest" / "index.html").read_text()
    )
    assert (site / "reference" / "openapi.json").exists()
    assert 'class="mermaid"' in (site / "concepts" / "architecture" / "index.html").read_text()
    assert "Memory" in (site / "reference" / "python" / "index.html").read_text()
    errors = (site / "reference" / "errors" / "index.html").read_text()
    assert "invalid_k" in errors and "UnknownFact" in errors  # the one list, generated


def test_nothing_generated_is_kept_in_the_docs_folder() -> None:
    for name in ("settings", "cli", "rest", "mcp", "errors"):
        page = (DOCS / "reference" / f"{name}.md").read_text(encoding="utf-8")
        assert f"<!-- generated: {name} -->" in page
        assert "| variable | in `Settings` |" not in page


def test_the_readme_is_a_front_page_with_the_two_commands_and_the_fast_loop() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    commands = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert any("slowwave backfill" in c and "slowwave facts" in c for c in commands)
    assert any(c.strip().endswith("python -m pytest -q -n auto --dist loadfile") for c in commands)
    assert any('python -m pytest -m "not slow"' in c for c in commands)
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (ROOT / link).exists(), link


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in runnable_pages() if blocks(p)], ids=lambda p: p.stem)
def test_the_page_runs_as_written_in_a_fresh_folder(page: Path, tmp_path: Path) -> None:
    folder = tmp_path / "reader"
    shutil.copytree(ROOT / "examples", folder / "examples")
    with fake_model() as model:
        env = reader_env(folder, SLOWWAVE_SERVE_PORT=str(free_port()), **model.env())
        with page_run(folder, env) as run:
            for block in blocks(page):
                run.run(block)


@pytest.mark.slow
def test_a_broken_example_fails_the_page(tmp_path: Path) -> None:
    page = tmp_path / "broken.md"
    page.write_text(
        "# A page\n\n```bash\nslowwave facts -c nobody-was-ever-here\n```\n\n"
        "```python\nimport slowwave\nslowwave.no_such_function()\n```\n\n"
        '```json\n{"mcpServers": {\n```\n\n'
        "<!-- docs-test: skip -->\n```bash\ntrue\n```\n",
        encoding="utf-8",
    )
    bash, python, config, unexplained = blocks(page)
    folder = tmp_path / "reader"
    folder.mkdir()
    with page_run(folder, reader_env(folder)) as run:
        with pytest.raises(AssertionError, match="exit 1"):
            run.run(bash)
        with pytest.raises(AssertionError, match="no_such_function"):
            run.run(python)
        with pytest.raises(AssertionError, match="not JSON"):
            run.run(config)
        with pytest.raises(AssertionError, match="must say why"):
            run.run(unexplained)


# variables slowwave reads that are no setting: the key (stdio MCP, the clients), the clients'
# server address, a test's switch
NOT_SETTINGS = {"SLOWWAVE_API_KEY", "SLOWWAVE_BASE_URL", "SLOWWAVE_WRITE_SCREENSHOTS"}


def test_every_variable_the_documentation_names_is_one_slowwave_reads() -> None:
    names = {n for _, ns, _ in variables() for n in ns} | NOT_SETTINGS
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    for page in pages:
        for name, wildcard in re.findall(r"(SLOWWAVE_[A-Z0-9_]*[A-Z0-9])(_\*)?", page.read_text()):
            if wildcard:
                assert any(n.startswith(f"{name}_") for n in names), (page, name)
            else:
                assert name in names, f"{page.relative_to(ROOT)} names {name}, which is no setting"
