"""Rerankers: a model that reads a query and a candidate text together and scores how well the
text answers it, to put a search's best candidates in a better order than the first-stage
channels (full text, vectors) could. One runtime today, a cross-encoder on onnxruntime
(``cross_encoder``: ms-marco-MiniLM-L-12-v2 from the catalog, or a local directory).

A search reranks only when asked (``SLOWWAVE_SEARCH_RERANK`` or the call's ``rerank``): the
model reads every candidate whole (on LongMemEval, 20 excerpts of up to 300 tokens took 0.9 s a
search at the median on two cores), and it is loaded the first time a search asks for it. The
items keep their first-stage ``score``; their order, and a fused list's scores, are the
reranker's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from slowwave.models.settings import Settings


class Reranker(Protocol):
    name: str

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """How well each text answers ``query``: higher is better, comparable across texts of
        one query (a logit, not a probability)."""
        ...

    def close(self) -> None: ...


def load_reranker(settings: Settings) -> Reranker:
    """The reranker ``SLOWWAVE_SEARCH_RERANK_MODEL`` names, its files checked against their pins
    (a catalog model must be prepared: ``slowwave models setup --model NAME``)."""
    from slowwave.models.embedding.catalog import RERANKER_CATALOG
    from slowwave.models.embedding.weights import onnx_model_dir
    from slowwave.models.rerank.cross_encoder import CrossEncoder

    reference = settings.search.rerank_model
    spec = RERANKER_CATALOG.get(reference)
    return CrossEncoder(
        onnx_model_dir(settings.home, reference, RERANKER_CATALOG),
        name=reference,
        max_tokens=spec.max_tokens if spec else 512,
    )
