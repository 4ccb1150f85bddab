"""The policy a run built to probe itself (:func:`rollbench.run.prepare.prepare_run`), kept for that run's own
in-process worker, so that one ``evaluate`` builds its policy once: a LeRobot checkpoint's host process (an
interpreter that imports torch), a served policy's connection or an agent's client starts once per run, not twice.

Only a run that executes in the process and thread that prepared it (``--executor local --workers 1``) keeps it:
worker processes and Ray actors build their own. The slot is per thread (runs in other threads never see it) and
holds at most one policy; :func:`take` hands it over once, to the first :func:`rollbench.run.worker.build_policy` of
an equal spec, and :func:`release` closes one nobody took (a run with nothing left to do, or one refused after
its probe). Between the probe and the first episode the policy was only asked for its ``info`` and
``check_tasks``: every episode still starts with ``reset(task, seed)``, so what it records is what a fresh build
records.
"""

from __future__ import annotations

import threading

from rollbench.core.contracts import Policy
from rollbench.core.interrupts import contained
from rollbench.core.spec import EvalSpec
from rollbench.run.deadline import close_within, closed_badly
from rollbench.run.finalize import finalize_elsewhere

_SLOT = threading.local()


def keep(spec: EvalSpec, policy: Policy) -> None:
    """Keep ``policy`` (built for ``spec``) for this thread's next :func:`take` of an equal spec; a policy kept
    before and never taken is closed first."""
    release()
    _SLOT.kept = (spec, policy)


def take(spec: EvalSpec) -> Policy | None:
    """The kept policy when it was built for a spec equal to ``spec`` (it is no longer kept), else None."""
    kept = getattr(_SLOT, "kept", None)
    if kept is None or kept[0] != spec:
        return None
    _SLOT.kept = None
    return kept[1]


def release() -> None:
    """Close the kept policy, if any (a close() that raises is reported on stderr: nothing depends on it)."""
    kept, _SLOT.kept = getattr(_SLOT, "kept", None), None
    if kept is not None:
        close_probe(kept[0], kept[1])


def close_probe(spec: EvalSpec, policy: Policy) -> None:
    """Close a probe's ``policy``; a close() that raises is a warning on stderr naming the policy, as a worker's is
    (:meth:`rollbench.run.worker.EpisodeWorker.close`): a policy is never refused for it, whether the run closes its
    probe at once (worker processes, Ray) or after its episodes (the kept probe)."""
    import sys

    with contained() as closing:
        close_within(policy.close, spec.policy_timeout_s, inline=policy.info.bounded)
    if not policy.info.bounded:  # its __del__ never runs on this thread (rollbench's own policies have none)
        finalize_elsewhere(policy, spec.policy_timeout_s)
    if closing.error is not None:
        print(f"warning: policy {spec.policy}: {closed_badly(closing.error)}", file=sys.stderr)
