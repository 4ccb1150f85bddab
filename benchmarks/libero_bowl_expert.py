"""A scripted pick-and-place expert for LIBERO's ``libero_spatial`` suite: a **measurement instrument** for
``benchmarks/bench_libero_stacks.py``, not a shipped policy (it is not registered, and it solves only the one skill
of one suite). It exists so that the two LIBERO stacks (``libero``: robosuite 1.5.2 in-process; ``libero_ref``:
robosuite 1.4.1 / MuJoCo 3.2.3 through the env host) can be compared on a fixed policy that succeeds part of the
time: a policy that never succeeds (``random``) cannot show an outcome difference.

What it sees, on both stacks alike: ``observation.state`` only, ``float64 (8,)`` = end-effector position (3, m, world
frame), end-effector axis-angle (3, rad; unused) and the two finger joints (2, m). It never reads the simulator
during an episode (``observation.raw`` is ignored) and it renders no camera. Before the run it is handed *scene
facts* (``--policy-options '{"facts": "FILE"}'``), a JSON file written by ``bench_libero_stacks.py --decode`` from
public benchmark data only: for each task, the pick and place objects named by the goal of the task's BDDL file
(``(:goal (And (On PICK PLACE)))``) and, for each stored initial state (keyed ``"libero_spatial/TASK_ID"``, so the
same file drives ``libero/...`` and ``libero_ref/...``), their settled positions, decoded from
LIBERO's own init file with LIBERO's own model (rollbench's in-process stack, the same file for both runs).

Which initial state an episode starts from: rollbench plans trial ``k`` with seed ``--seed + k`` and initial state
``k`` (``rollbench eval --help``), so the policy takes ``k = seed - base_seed`` (option ``base_seed``, the run's
``--seed``, default 0); the benchmark checks every recorded episode's ``initial_state`` against it.

The skill (every target a fixed offset from the decoded positions; the constants are the Akita black bowl's
geometry, measured from its collision geoms: rim at 4.7 cm from the centre, 5.3 cm high): open the gripper, go
above the bowl's rim on the side facing the robot (the fingers close along world y, so they pinch the wall there),
descend, close, lift, carry the bowl above the plate, lower it, open, rise. Each step's action is the clipped
proportional step towards the phase's target (OSC_POSE delta: 1.0 = 5 cm), zero rotation; a phase ends when the
end effector is within its tolerance or after its step budget, so the loop is closed on the observed state.

Action: ``float32 (1, 7)`` in ``[-1, 1]``: position delta (3), rotation delta (3, always 0), gripper (-1 open, +1
closed). Errors: a task or initial state absent from the facts file is an ``EpisodeError`` (fault ``policy``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rollbench import EpisodeError, Observation, PolicyInfo, TaskInfo, policy_options

RIM_RADIUS = 0.047  # m: the bowl's upper wall geoms lie 4.6-4.8 cm from its centre (akita_black_bowl collision geoms)
GRASP_HEIGHT = 0.043  # m above the bowl's body origin (its base): fingertips ~1.5 cm below the 5.1 cm rim
CARRY_HEIGHT = 0.16  # m above the pick/place object's origin while moving
PLACE_HEIGHT = 0.06  # m above the plate's origin when the gripper opens
STEP_M = 0.05  # m of end-effector motion per unit of action (LIBERO's OSC_POSE output_max for position)


@dataclass(frozen=True)
class Phase:
    """One waypoint: where the end effector goes (m), the gripper command, the tolerance (m) and step budget."""

    name: str
    target: tuple[float, float, float]
    gripper: float
    tolerance: float
    budget: int
    speed: float = 1.0  # cap on |action| per axis


def plan(pick: np.ndarray, place: np.ndarray) -> list[Phase]:
    """The phases for picking the bowl whose origin is ``pick`` and setting it on the object at ``place`` (both
    ``(3,)`` m, world frame)."""
    grasp = pick + np.array([0.0, -RIM_RADIUS, GRASP_HEIGHT])
    drop = place + np.array([0.0, -RIM_RADIUS, PLACE_HEIGHT])
    above = lambda p, z: (float(p[0]), float(p[1]), float(z))  # noqa: E731
    carry_z = max(pick[2], place[2]) + CARRY_HEIGHT
    return [
        Phase("approach", above(grasp, grasp[2] + 0.08), -1.0, 0.01, 60),
        Phase("descend", above(grasp, grasp[2]), -1.0, 0.006, 40, speed=0.4),
        Phase("close", above(grasp, grasp[2]), 1.0, -1.0, 12),
        Phase("lift", above(grasp, carry_z), 1.0, 0.02, 40, speed=0.6),
        Phase("carry", above(drop, carry_z), 1.0, 0.015, 60, speed=0.6),
        Phase("lower", above(drop, drop[2]), 1.0, 0.01, 40, speed=0.4),
        Phase("open", above(drop, drop[2]), -1.0, -1.0, 10),
        Phase("rise", above(drop, carry_z), -1.0, 0.02, 40, speed=0.5),
    ]


class BowlExpert:
    """The rollbench Policy protocol (``info``, ``reset``, ``act``, ``close``): see the module docstring."""

    def __init__(self, facts: dict[str, Any], base_seed: int) -> None:
        self.facts = facts
        self.base_seed = base_seed
        drives = tuple(f"{fam}/{t}" for t in facts["tasks"] for fam in ("libero", "libero_ref"))
        self.info = PolicyInfo(name="libero-bowl-expert", tasks=drives, replan_every=1)
        self.phases: list[Phase] = []
        self.phase = 0
        self.steps_in_phase = 0

    def reset(self, task: TaskInfo, seed: int) -> None:
        entry = self.facts["tasks"].get(task.name.split("/", 1)[1])  # "libero_spatial/3" on either family
        k = str(seed - self.base_seed)
        if entry is None or k not in entry["initial_states"]:
            raise EpisodeError(f"no scene facts for {task.name} initial state {k}", fault="policy")
        pos = entry["initial_states"][k]
        self.phases = plan(np.asarray(pos["pick"], dtype=np.float64), np.asarray(pos["place"], dtype=np.float64))
        self.phase, self.steps_in_phase = 0, 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        eef = np.asarray(observation.state[:3], dtype=np.float64)
        while True:
            ph = self.phases[min(self.phase, len(self.phases) - 1)]
            err = np.asarray(ph.target) - eef
            reached = ph.tolerance >= 0 and float(np.linalg.norm(err)) <= ph.tolerance
            if self.phase >= len(self.phases) - 1 or not (reached or self.steps_in_phase >= ph.budget):
                break
            self.phase, self.steps_in_phase = self.phase + 1, 0
        self.steps_in_phase += 1
        action = np.zeros(7, dtype=np.float64)
        action[:3] = np.clip(err / STEP_M, -ph.speed, ph.speed)
        action[6] = ph.gripper
        return action.astype(np.float32)[None]

    def close(self) -> None:
        pass


@policy_options(facts=str, base_seed=int)
def make(name: str, options: dict[str, Any]) -> BowlExpert:
    """The factory (``--policy libero_bowl_expert:make`` with ``benchmarks/`` on ``PYTHONPATH``). Options: ``facts``
    (path of the scene-facts JSON, required), ``base_seed`` (the run's ``--seed``, default 0)."""
    if "facts" not in options:
        from rollbench import ConfigError

        raise ConfigError(
            "libero_bowl_expert needs --policy-options '{\"facts\": FILE}' (bench_libero_stacks.py --decode)"
        )
    facts = json.loads(Path(options["facts"]).read_text())
    return BowlExpert(facts, int(options.get("base_seed", 0)))
