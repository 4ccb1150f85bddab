"""Grading a run directory from its files: every reported number, the invariant checks, the statistics."""
