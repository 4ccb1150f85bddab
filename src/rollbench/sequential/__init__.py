"""Sequential paired A/B evaluation (``rollbench sequential``, ``compare --sequential``): :mod:`.runner` runs the two
arms through :func:`rollbench.api.evaluate`, :mod:`.recompute` recomputes the decision from their run directories;
the statistics are :mod:`rollbench.grading.sequential`."""
