"""The ``libero`` family (LIBERO's suites and LIBERO-PRO's language-perturbed ones; entry point ``libero``). Modules:

* :mod:`.env`: the family, its tasks and the env, by the reference protocol (``FAMILY``);
* :mod:`.tasks`: the task table (suites, instructions, LIBERO-PRO's suites and variants);
* :mod:`.scene`: how a scene is seeded, reset and rendered;
* :mod:`.setup`: making the installed LIBERO runnable at run time (config, assets, one upstream fix, init states).
"""
