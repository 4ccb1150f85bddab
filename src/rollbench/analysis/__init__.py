"""Analysis of recorded runs: statistics (:mod:`.stats`), task x model summaries, paired comparisons and reports.

Nothing here re-derives a per-episode fact: every episode's task, seed, initial state, success and length come from
:func:`rollbench.grade` of its run directory. Importing this package is light (numpy only); scipy, statsmodels and
matplotlib are imported by the functions that use them.
"""
