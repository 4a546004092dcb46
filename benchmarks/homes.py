"""A benchmark's fresh home, prepared as the home it was started from.

``slowwave models setup`` exports the embedding package to ONNX in the home it runs for
(``models.embedding.export``), and the ``auto`` runtime of a home that has the export embeds
with onnxruntime instead of torch. A benchmark works in a home of its own, empty: linking the
started-from home's export into it measures the runtime a set-up home runs, and spares each of
its processes that embeds the ~11 s of importing torch. Where the started-from home (the
environment's ``SLOWWAVE_HOME``, else ``./.slowwave``) has none, the fresh home goes without.
"""

from __future__ import annotations

import os
from pathlib import Path


def fresh_home(home: Path | str) -> Path:
    """``home`` with the started-from home's embedding export linked in; returned as a Path."""
    from slowwave.models.llm.weights import model_folder
    from slowwave.models.settings import Settings

    home = Path(home)
    started_from = Settings()
    name = started_from.embedding.model
    source = model_folder(started_from.home, name)
    target = model_folder(home, name)
    if (source / "export.json").is_file() and not os.path.lexists(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(source.resolve(), target_is_directory=True)
    return home
