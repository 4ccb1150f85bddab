"""The public plug-in API: name -> the module that defines it. ``rollbench.NAME`` loads these lazily (see
:mod:`rollbench`), and the deprecated old paths (``rollbench.types``, ``rollbench.core.types``,
``rollbench.registry``) name ``rollbench.NAME`` in their warning for exactly these. A name leaves this table only
after a deprecation (``tests/test_public_api.py`` fails otherwise)."""

from __future__ import annotations

CONTRACTS = "rollbench.core.contracts"
BATCH = "rollbench.core.batch"
REGISTRY = "rollbench.core.registry"
OBSERVER = "rollbench.run.observer"

PLUGIN_API: dict[str, str] = {
    # a policy: the protocol, its static description, what it sees, how it ends an episode on purpose
    "Policy": CONTRACTS,
    "PolicyInfo": CONTRACTS,
    "Observation": CONTRACTS,
    "TaskInfo": CONTRACTS,
    "Perturbation": "rollbench.core.perturbation",
    "PolicyStop": CONTRACTS,
    "PolicyGiveUp": CONTRACTS,
    "policy_options": REGISTRY,
    # a policy's optional hooks, and the batched form one of them returns
    "ChecksTasks": CONTRACTS,
    "FinishesEpisodes": CONTRACTS,
    "Batchable": BATCH,
    "BatchPolicy": BATCH,
    "SlotPolicies": BATCH,
    # an env family: the protocols, how it is built, one step's outcome, the hold action, the optional hook
    "Env": CONTRACTS,
    "EnvFamily": REGISTRY,
    "EnvOptions": REGISTRY,
    "StepResult": CONTRACTS,
    "HoldAction": CONTRACTS,
    "ExpectsImages": CONTRACTS,
    # what a run tells its caller (rollbench.evaluate(observer=...)): the observer and its typed events
    "RunObserver": OBSERVER,
    "RunStart": OBSERVER,
    "EpisodeStart": OBSERVER,
    "EpisodeProgress": OBSERVER,
    "EpisodeSummary": OBSERVER,
    "RunEnd": OBSERVER,
    # what rollbench.evaluate and rollbench.grade return: the grade document and its episodes (issue 41)
    "GradeDocument": "rollbench.core.grade_model",
    "GradedEpisode": "rollbench.core.grade_model",
    # errors a plug-in raises (and the Python API's callers catch)
    "RollbenchError": CONTRACTS,
    "ConfigError": CONTRACTS,
    "EpisodeError": CONTRACTS,
}


def public_in(module: str) -> frozenset[str]:
    """The public names defined in ``module``."""
    return frozenset(name for name, home in PLUGIN_API.items() if home == module)
