"""ONNX embeddings with onnxruntime and tokenizers: a catalog model (``bge-small-en-v1.5``,
prepared by ``slowwave models setup``), a sentence-transformers package's export
(``models.embedding.export``, the ``auto`` runtime's) or a local directory holding
``model.onnx`` and ``tokenizer.json``.

A BERT encoder's first token (CLS) is the text's vector, L2-normalised, as bge is trained;
for an export of a model that pools the mean of its tokens (MiniLM), that mean.
What is stored (facts, windows of messages) is embedded as it is; a search's query is
embedded behind the model's query prefix (``query_prefix``; ``as_queries``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from slowwave.models.embedding.base import Vectors

# texts a run for a mean-pooled export, sorted by length first: 16 embedded LoCoMo's windows a
# little faster than 64 on two cores, its short observations alike
MEAN_BATCH = 16


class OnnxEmbedder:
    """An ``Embedder`` backed by onnxruntime on the CPU."""

    def __init__(
        self,
        folder: Path,
        *,
        name: str,
        query_prefix: str = "",
        max_tokens: int = 512,
        pooling: Literal["cls", "mean"] = "cls",
    ) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.folder = folder
        self.name = name
        self.query_prefix = query_prefix
        self.pooling = pooling
        self._options = {"query_prefix": query_prefix, "max_tokens": max_tokens, "pooling": pooling}
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_tokens)
        self._tokenizer.no_padding()  # padding is ours to mask (MiniLM's file pads to 128)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # its warnings about unused initialisers are not ours
        self._session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self._embed_one("dimension").shape[0])  # its width, whatever the pooling

    def __reduce__(self) -> tuple[Any, ...]:
        """Sent to another process (an actor on a Ray worker), it is loaded there again from
        the same folder, which must exist on that machine too."""
        return (_load, (str(self.folder), self.name, self._options))

    def embed(self, texts: Sequence[str]) -> Vectors:
        """CLS pooling (bge, int8): one text a run. The int8 model quantises its activations
        over the whole batch, so a text's vector moved with the texts beside it (cosine 0.994
        to itself alone); alone, it is the same every time, and with no padding 114 windows of
        LoCoMo took 10.7 s against 15.4 s in batches of 64 (two cores). Mean pooling (an
        export of a float32 model): ``MEAN_BATCH`` texts of about one length a run, their
        padding masked out of the mean; a text's vector moves by at most 3e-8 with its
        neighbours, and LoCoMo's observations embed at about 200 a second against 115 one at
        a time (windows of 8 messages alike either way)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.pooling == "mean":
            return self._embed_mean(texts)
        return np.stack([self._embed_one(text) for text in texts])

    def _embed_mean(self, texts: Sequence[str]) -> Vectors:
        encoded = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), MEAN_BATCH):
            batch = order[start : start + MEAN_BATCH]
            width = max(len(encoded[i].ids) for i in batch)
            ids = np.zeros((len(batch), width), dtype=np.int64)
            mask = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                ids[row, : len(encoded[i].ids)] = encoded[i].ids
                mask[row, : len(encoded[i].ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feed)[0]
            weights = mask[..., None].astype(np.float32)
            mean = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
            vectors[batch] = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        return vectors

    def _embed_one(self, text: str) -> Vectors:
        encoded = self._tokenizer.encode(text)
        ids = np.array([encoded.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]
        first = np.asarray(hidden[0, 0] if hidden.ndim == 3 else hidden[0], dtype=np.float32)
        return first / max(float(np.linalg.norm(first)), 1e-12)

    def close(self) -> None:
        return None


def _load(folder: str, name: str, options: dict[str, Any]) -> OnnxEmbedder:
    return OnnxEmbedder(Path(folder), name=name, **options)
