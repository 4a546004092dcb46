"""A cross-encoder on onnxruntime and tokenizers: the query and a text as one BERT input
(``[CLS] query [SEP] text [SEP]``, token types 0 then 1), the model's one logit the score."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


class CrossEncoder:
    """A ``Reranker`` that scores one pair a run: the int8 model quantises its activations over
    the whole batch, so a pair scored beside others would score differently each time (the
    same reason ``OnnxEmbedder`` embeds one text a run); alone, a pair's score is the same
    every time, and no pair is padded to the longest of its batch."""

    def __init__(self, folder: Path, *, name: str, max_tokens: int = 512) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.folder = folder
        self.name = name
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_tokens, strategy="only_second")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # its warnings about unused initialisers are not ours
        self._session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [self._score_one(query, text) for text in texts]

    def _score_one(self, query: str, text: str) -> float:
        encoded = self._tokenizer.encode(query, text)
        ids = np.array([encoded.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([encoded.type_ids], dtype=np.int64)
        logits = self._session.run(None, feed)[0]
        return float(np.asarray(logits).reshape(-1)[0])

    def close(self) -> None:
        return None
