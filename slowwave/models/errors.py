"""The errors every layer raises, from where they live: ``slowwave_client.errors`` (the client
installs without the server, and raises the same classes from the server's answers). The public
list is ``slowwave.errors``."""

from __future__ import annotations

from slowwave_client.errors import *  # noqa: F403  (every class, as its __all__ names them)
from slowwave_client.errors import __all__ as __all__
