"""Env families that run in their own interpreter (docs/env-host.md): the near side (:mod:`.remote`,
:mod:`.libero_hosted`, the families) and, in :mod:`.far`, the scripts that run in the benchmark's venv."""
