"""The public plug-in API (``rollbench.Policy``, ``rollbench.PolicyInfo``...): every name stays (a name that
disappears fails here), the old paths still import with a DeprecationWarning, and the optional hooks a plug-in
declares are the ones rollbench calls."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import rollbench
from run_tables import recorded_tables

# The oracle: the names a plug-in may rely on, written out here (not read from rollbench). Removing one from the
# package without a deprecation fails test_every_public_name_stays.
PLUGIN_NAMES = {
    "Policy", "PolicyInfo", "Observation", "TaskInfo", "Perturbation", "PolicyStop", "PolicyGiveUp", "policy_options",
    "ChecksTasks", "FinishesEpisodes", "Batchable", "BatchPolicy", "SlotPolicies",
    "Env", "EnvFamily", "EnvOptions", "StepResult", "HoldAction", "ExpectsImages",
    "RollbenchError", "ConfigError", "EpisodeError",
    "RunObserver", "RunStart", "EpisodeStart", "EpisodeProgress", "EpisodeSummary", "RunEnd",
    "GradeDocument", "GradedEpisode",
}  # fmt: skip
API_NAMES = {"evaluate", "grade", "Execution", "EvalSpec", "__version__"}
# every name ``rollbench.core.types`` had before it became a deprecated path (and ``rollbench.types`` before that)
OLD_TYPES = {
    "SuccessRule", "SUCCESS_RULES", "TerminationReason", "TERMINATION_REASONS", "RollbenchError", "ConfigError",
    "Fault", "FAULTS", "EpisodeError", "InfrastructureError", "HoldAction", "TaskInfo", "Observation", "StepResult",
    "Env", "PolicyInfo", "PolicyStop", "PolicyGiveUp", "Policy",
}  # fmt: skip


def test_every_public_name_stays() -> None:
    from rollbench.core.public import PLUGIN_API

    assert set(rollbench.__all__) >= PLUGIN_NAMES | API_NAMES
    assert set(rollbench.__all__) == set(PLUGIN_API) | API_NAMES  # __all__ written out = the table
    for name in sorted(PLUGIN_NAMES | API_NAMES):
        assert getattr(rollbench, name) is not None, name
    assert set(dir(rollbench)) >= PLUGIN_NAMES


def test_import_rollbench_loads_no_plug_in_module_until_a_name_is_used() -> None:
    code = (
        "import sys, rollbench\n"
        "print(sorted(m for m in ('numpy', 'rollbench.core.contracts', 'rollbench.core.registry') if m in sys.modules))\n"
        "rollbench.PolicyInfo\n"
        "print('rollbench.core.contracts' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:2] == ["[]", "True"]


@pytest.mark.parametrize(
    ("old", "names", "public"),
    [
        ("rollbench.types", OLD_TYPES, True),
        ("rollbench.core.types", OLD_TYPES, True),
        ("rollbench.registry", {"policy_options", "EnvFamily", "EnvOptions", "make_policy"}, False),
    ],
)
def test_old_paths_still_import_with_a_deprecation_warning(old: str, names: set[str], public: bool) -> None:
    module = importlib.import_module(old)
    for name in sorted(names):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(module, name)
        (warning,) = caught
        assert warning.category is DeprecationWarning and warning.filename == __file__
        where = f"rollbench.{name}" if name in PLUGIN_NAMES else f"rollbench.core.{old.rsplit('.', 1)[1]}"
        assert f"{old}.{name} is deprecated: import {where}" in str(warning.message).replace("contracts", "types")
        if name in PLUGIN_NAMES:
            assert value is getattr(rollbench, name)
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


def test_from_import_of_an_old_path_warns_at_the_importing_line() -> None:
    code = "import warnings\nwarnings.simplefilter('default')\nfrom rollbench.types import PolicyInfo\n"
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    assert err.splitlines()[0] == (
        "<string>:3: DeprecationWarning: rollbench.types.PolicyInfo is deprecated: import rollbench.PolicyInfo instead"
    )


def test_hooks_are_recognised_only_on_policies_that_define_them() -> None:
    import public_api_plugins as p

    assert isinstance(p.Still(), rollbench.Policy)
    assert not isinstance(p.Still(), rollbench.ChecksTasks | rollbench.Batchable | rollbench.FinishesEpisodes)
    assert isinstance(p.Refuses(), rollbench.ChecksTasks) and isinstance(p.Batched(), rollbench.Batchable)
    assert isinstance(p.HalfBatch(), rollbench.BatchPolicy) and not isinstance(p.HalfBatch(), rollbench.SlotPolicies)


def test_a_plug_in_check_tasks_hook_refuses_the_run_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(rollbench.ConfigError, match=r"^refuses scripted/reach at \(224, 224\)$"):
        rollbench.evaluate(
            out=tmp_path / "run", env="scripted/reach", policy="public_api_plugins:make_refuses", episodes=1
        )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("factory", "batch_size", "value"), [("make_still", 2, 0.0), ("make_batched", 1, 0.5), ("make_batched", 2, 0.5)]
)
def test_a_plug_in_batched_hook_serves_the_episodes(
    tmp_path: Path, factory: str, batch_size: int, value: float
) -> None:
    """Its batched form answers 0.5 and its ``act`` 0: every recorded action says which one ran (a worker runs its
    episodes through the batched form at any batch size, 1 included)."""
    out = tmp_path / "run"
    rollbench.evaluate(
        out=out,
        env="scripted/reach",
        policy=f"public_api_plugins:{factory}",
        episodes=3,
        max_steps=4,
        execution=rollbench.Execution(batch_size=batch_size),
    )
    actions = np.array(recorded_tables(out)[0]["action"].to_pylist())
    assert actions.shape == (12, 2) and (actions == value).all()


def test_no_module_probes_for_an_optional_hook_by_name() -> None:
    """The hooks are declared protocols, tested with isinstance: a ``getattr(x, "batched", None)`` probe (the way
    they were found before issue 29) would bypass the declaration."""
    src = Path(rollbench.__file__).parent
    hooks = ("batched", "finish_episode", "check_tasks", "slot_policy", "expect_images")
    probes = [
        f"{p.relative_to(src)}:{i}"
        for p in sorted(src.rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if "getattr(" in line and any(f'"{h}"' in line for h in hooks)
    ]
    assert probes == []


def test_a_misspelt_evaluate_argument_names_the_field_it_meant(tmp_path: Path) -> None:
    with pytest.raises(rollbench.ConfigError) as err:
        rollbench.evaluate(env="scripted/reach", policy="random", episdoes=3, out=tmp_path / "run")
    assert "episdoes: Extra inputs are not permitted (got 3) Did you mean episodes?" in str(err.value)
    assert not (tmp_path / "run").exists()
