"""Env families that run in their own interpreter (docs/env-host.md): the near side (:mod:`.remote`,
the LIBERO families in :mod:`rollbench.envs.libero`) and, in :mod:`.far`, the scripts that run in the benchmark's venv."""
