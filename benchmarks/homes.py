"""A benchmark's fresh home, prepared as the home it was started from.

``slowwave models setup`` exports the embedding package to ONNX in the home it runs for
(``models.embedding.export``), and the ``auto`` runtime of a home that has the export embeds
with onnxruntime instead of torch. A benchmark works in a home of its own, empty: linking the
started-from home's export into it measures the runtime a set-up home runs, and spares each of
its processes that embeds the ~11 s of importing torch. Where the started-from home (the
environment's ``SLOWWAVE_HOME``, else ``./.slowwave``) has none, the fresh home goes without.
"""

from __future__ import annotations

from pathlib import Path


def fresh_home(home: Path | str) -> Path:
    """``home`` with the started-from home's embedding export linked in; returned as a Path."""
    from slowwave.models.embedding.export import link_export
    from slowwave.models.llm.weights import model_folder
    from slowwave.models.settings import Settings

    started_from = Settings()
    link_export(model_folder(started_from.home, started_from.embedding.model), Path(home))
    return Path(home)
