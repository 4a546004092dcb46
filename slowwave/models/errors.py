"""The root of every error a user of slowwave can act on.

``SlowwaveError`` is what to catch around slowwave's API, and what the CLI prints as one line
(by its message, never a traceback). Each subclass keeps the built-in base it had
(``ValueError``, ``RuntimeError``, ``ConnectionError``), so code that caught that still does.
Errors that slowwave handles itself on the way (an answer that does not parse, a chunk the
database refuses) are not meant for the user and may still reach here only when one escapes.
"""

from __future__ import annotations


class SlowwaveError(Exception):
    """Something a user can act on: a database out of reach, a model not set up, a run that
    cannot be reverted as asked, a setting that does not hold."""
