"""The ``libero`` family (LIBERO's suites and LIBERO-PRO's perturbed ones; entry point ``libero``). Modules:

* :mod:`.env`: the family, its tasks and the env, by the reference protocol (``FAMILY``);
* :mod:`.tasks`: the task table (suites, instructions);
* :mod:`.pro`: LIBERO-PRO's suites (``pro_manifest.json``), the in-process check against LIBERO-PRO's own files, its env;
* :mod:`.scene`: how a scene is seeded, reset and rendered;
* :mod:`.setup`: making the installed LIBERO runnable at run time (config, assets, one upstream fix, init states).
"""
