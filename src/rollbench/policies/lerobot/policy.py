"""``--policy lerobot:PATH_OR_REPO_ID[@REVISION]``: a LeRobot checkpoint run by lerobot's own code in its own process.

See the package docstring for what runs where. :class:`LeRobotPolicy` is the single-episode Policy;
:meth:`LeRobotPolicy.batched` gives :class:`LeRobotBatch`, which sends every asking slot's observation to the one
host in one frame per lockstep step (the host runs each slot's ``select_action``; see ``host.py``).

Each call returns a chunk of one action ``float32 (1, action_dim)``: the checkpoint's own action queue
(``n_action_steps``) lives in lerobot's policy object, so rollbench asks every step (``replan_every = 1``), as
lerobot-eval's ``rollout`` calls ``select_action`` every step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, EpisodeError, InfrastructureError, Observation, PolicyInfo, TaskInfo
from rollbench.policies.lerobot.client import HostProcess, find_python
from rollbench.policies.lerobot.observe import FAMILIES, Family, for_host, mismatches, size_warnings
from rollbench.wire.obs_map import positive

DEFAULT_TIMEOUT_S = 120.0  # one act of all slots; a CPU forward pass of a large VLA can take tens of seconds
DEFAULT_START_TIMEOUT_S = 300.0  # interpreter start, torch and lerobot imports, config (and Hub) resolution
LOAD_TIMEOUT_S = 600.0  # weights into memory (and onto the device) at the first episode
SEEDINGS = ("per-episode", "lerobot-eval")
ONE_STREAM = (
    "seeding lerobot-eval reproduces one lerobot-eval run's single random stream (seeded once, before the policy is "
    "built)"
)


def version_check(info: Mapping[str, Any]) -> dict[str, Any]:
    """``{"version_mismatch": TEXT}`` when the checkpoint says which lerobot saved it (``checkpoint.saved_by_lerobot``,
    from its model card) and the host runs another release; else ``{}``. Printed as a warning and kept in run.json."""
    saved = (info.get("checkpoint") or {}).get("saved_by_lerobot")
    host = (info.get("versions") or {}).get("lerobot")
    if not saved or not host or saved == host:
        return {}
    return {"version_mismatch": f"checkpoint saved by lerobot {saved}, run by lerobot {host}"}


def parse_name(name: str) -> tuple[str, str | None]:
    """``lerobot:PATH_OR_REPO_ID[@REVISION]`` -> ``(checkpoint, revision)``; ConfigError when empty."""
    rest = name.split(":", 1)[1] if ":" in name else ""
    checkpoint, _, revision = rest.partition("@")
    if not checkpoint:
        raise ConfigError("lerobot policy: give a checkpoint, lerobot:PATH or lerobot:USER/REPO[@REVISION]")
    return checkpoint, revision or None


class _Host:
    """The host process shared by a policy and its batched form; restarted after an infrastructure failure."""

    def __init__(self, name: str, options: Mapping[str, Any]) -> None:
        self.checkpoint, self.revision = parse_name(name)
        self.python = find_python(options.get("python"))
        self.device = str(options.get("device", "auto"))
        self.dtype = options.get("dtype")
        self.timeout_s = positive(options, "timeout_s", DEFAULT_TIMEOUT_S)
        self.start_timeout_s = positive(options, "start_timeout_s", DEFAULT_START_TIMEOUT_S)
        self.seeding = str(options.get("seeding", "per-episode"))
        if self.seeding not in SEEDINGS:
            raise ConfigError(f"lerobot policy: seeding {self.seeding!r} is not one of {', '.join(SEEDINGS)}")
        self.proc: HostProcess | None = self._start(ConfigError)
        self.info: dict[str, Any] = self.proc.info
        self.families = for_host(self.info.get("lerobot_eval_image_sizes"))  # as the host's lerobot-eval renders
        self.family: str | None = None
        self.generation = 0  # hosts started so far, minus one: slot state lives in one generation only

    def _start(self, error: type[Exception]) -> HostProcess:
        try:
            return HostProcess(
                self.python, self.checkpoint, self.revision, self.device, self.dtype, self.start_timeout_s
            )
        except ConfigError as exc:
            if error is ConfigError:
                raise
            raise InfrastructureError(f"lerobot policy host could not be restarted: {exc}") from None

    def call(
        self, message: dict[str, Any], arrays: dict[str, np.ndarray] | None = None, timeout_s: float | None = None
    ):
        """A round trip; a dead host is replaced first. An ``error`` reply raises EpisodeError (fault policy)."""
        if self.proc is None or not self.proc.alive():
            if self.proc is not None:
                self.proc.stop()
            self.proc, self.family = self._start(InfrastructureError), None
            self.generation += 1
        try:
            reply, out = self.proc.call(message, arrays, timeout_s or self.timeout_s)
        except InfrastructureError:
            self.proc = None
            raise
        if reply.get("op") == "error":
            raise EpisodeError(f"lerobot policy ({reply.get('where')}): {reply.get('message')}", fault="policy")
        return reply, out

    def family_for(self, task: TaskInfo, seed: int) -> Family:
        """The family's observation builder; loads the policy for it on first use. With seeding ``lerobot-eval``
        the load seeds lerobot's generators once with ``seed`` (the run's first episode seed, lerobot-eval's
        ``--seed``), and a host restarted mid-run is refused: its stream is lost."""
        fam = self.families.get(task.family)
        if fam is None:
            raise EpisodeError(f"lerobot policy: no lerobot env wrapper for {task.family}", fault="policy")
        if self.seeding == "lerobot-eval" and self.generation > 0:
            raise InfrastructureError(f"the lerobot policy host was restarted, so {ONE_STREAM} is lost for this run")
        if self.family != task.family:
            load: dict[str, Any] = {"op": "load", "family": task.family, "env_task": fam.env_task(task)}
            if self.seeding == "lerobot-eval":
                load["seed_once"] = int(seed)
            self.call(load, None, LOAD_TIMEOUT_S)
            self.family = task.family
        return fam

    def close(self) -> None:
        if self.proc is not None:
            self.proc.close()
            self.proc = None


class LeRobotBatch:
    """A :class:`rollbench.core.batch.BatchPolicy`: B slots of one host (see the module docstring)."""

    def __init__(self, host: _Host, info: PolicyInfo, size: int, owns_host: bool) -> None:
        self.host, self.info, self.size, self.owns_host = host, info, size, owns_host
        self.tasks: dict[int, TaskInfo] = {}
        self.generations: dict[int, int] = {}  # slot -> the host generation its episode was reset on

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        self.generations.pop(slot, None)
        self.host.family_for(task, seed)
        self.host.call({"op": "reset", "slot": int(slot), "seed": int(seed)})
        self.tasks[slot] = task
        self.generations[slot] = self.host.generation

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[np.ndarray | BaseException]:
        """One ``act`` frame for every asking slot whose observation could be built; per slot its ``float32 (1,
        action_dim)`` action or the exception that ends its episode. A slot reset on a host that has since been
        replaced gets InfrastructureError (its policy state died with that host)."""
        answers: dict[int, np.ndarray | BaseException] = {}
        items: list[dict[str, Any]] = []
        sent: list[int] = []
        arrays: dict[str, np.ndarray] = {}
        for slot, obs, text in zip(slots, observations, instructions, strict=True):
            if self.generations.get(slot) != self.host.generation or self.host.proc is None:
                answers[slot] = InfrastructureError("the lerobot policy host was restarted during this episode")
                continue
            try:
                raw, said = self.host.families[self.tasks[slot].family].build(obs, text)
            except EpisodeError as exc:
                answers[slot] = exc
                continue
            arrays.update({f"{slot}/{k}": v for k, v in raw.items()})
            items.append({"slot": int(slot), "task": said})
            sent.append(int(slot))
        if items:
            reply, out = self.host.call({"op": "act", "items": items}, arrays)
            by_slot = {int(i.get("slot", -1)): i for i in reply.get("items", []) if isinstance(i, dict)}
            for slot in sent:
                got, action = by_slot.get(slot), out.get(str(slot))
                if got is not None and "message" in got:
                    answers[slot] = EpisodeError(f"lerobot policy: {got['message']}", fault="policy")
                elif got is None or action is None:
                    answers[slot] = EpisodeError(f"lerobot policy host gave no answer for slot {slot}")
                else:
                    answers[slot] = np.asarray(action, dtype=np.float32).reshape(1, -1)
        return [answers[s] for s in slots]

    def close(self) -> None:
        if self.owns_host:
            self.host.close()


class LeRobotPolicy:
    """One LeRobot checkpoint as a rollbench Policy (see the module docstring)."""

    def __init__(self, name: str, options: Mapping[str, Any]) -> None:
        self.host = _Host(name, options)
        self.options = dict(options)
        info = self.host.info
        self.name = name
        needs_images = any(f.get("type") == "VISUAL" for f in info.get("input_features", {}).values())
        self.info = PolicyInfo(
            name=name,
            chunk_size=1,
            replan_every=1,
            needs_images=needs_images,
            provenance={
                "lerobot": {
                    **info,
                    "python_executable": info.get("python_executable", self.host.python),
                    "seeding": self.host.seeding,
                    **version_check(info),
                }
            },
            tasks=tuple(f"{fam}/*" for fam in FAMILIES),
            image_sizes={fam: f.image_size for fam, f in self.host.families.items()},
            one_stream=ONE_STREAM if self.host.seeding == "lerobot-eval" else "",
            warnings=(*version_check(info).values(), *size_warnings(info, self.host.families)),
        )
        self._single = LeRobotBatch(self.host, self.info, 1, owns_host=False)

    def check_tasks(self, tasks: Sequence[TaskInfo], image_size_of: Any) -> None:
        """ConfigError naming every feature the checkpoint needs that a task does not provide (or with another
        shape), a wrong action size, or images rendered at another size than lerobot-eval's."""
        problems = []
        for task in tasks:
            fam = self.host.families.get(task.family)
            if fam is None:
                problems.append(f"{task.name}: lerobot has no env wrapper for {task.family}")
                continue
            problems += [
                f"{task.name}: {p}" for p in mismatches(self.host.info, task.family, fam, image_size_of(task), task)
            ]
        if problems:
            raise ConfigError(f"checkpoint {self.name.split(':', 1)[1]} does not fit: " + "; ".join(problems))

    def reset(self, task: TaskInfo, seed: int) -> None:
        self._single.reset_slot(0, task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        answer = self._single.act_batch([0], [observation], [instruction])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def batched(self, size: int) -> LeRobotBatch:
        """All ``size`` slots on this policy's host (slot state is per slot inside the host); closing the batch
        stops the host."""
        return LeRobotBatch(self.host, self.info, size, owns_host=True)

    def close(self) -> None:
        self.host.close()
