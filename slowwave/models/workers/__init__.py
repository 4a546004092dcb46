"""Ray workers: the cluster slowwave joins (or starts) and the actor pools its runtimes run in.

Only the runtimes (``models.llm``, ``models.embedding``) use this package; Ray's failures are
translated here into slowwave's own ``RuntimeUnreachable``, so no stage imports Ray.
"""
