"""Typed records (episodes, facts, plans) and the model runtimes the stages call."""
