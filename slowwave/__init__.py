"""slowwave: nightly consolidation of episodic memory into semantic memory."""

__version__ = "0.1.0"
