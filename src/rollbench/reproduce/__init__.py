"""Reproducing published numbers: shipped reference tables with their sources, and a statistical verdict per suite.

* :mod:`rollbench.reproduce.model`: the reference file format (``references/*.json``), validation, loading;
* :mod:`rollbench.reproduce.verdict`: the test, power and verdict rule for one suite;
* :mod:`rollbench.reproduce.protocol`: what a run did against what a reference states;
* :mod:`rollbench.reproduce.document`: the reproduction document (JSON) and its plain-text form.
"""

from rollbench.reproduce.document import render_text, reproduce
from rollbench.reproduce.model import ReferenceFileError, load_reference, parse_reference, shipped_names

__all__ = ["ReferenceFileError", "load_reference", "parse_reference", "render_text", "reproduce", "shipped_names"]
