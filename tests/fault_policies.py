"""Policies used by the tests to provoke specific behaviours. They are loaded by name as
``fault_policies:<factory>`` (rollbench's ``module:factory`` policy syntax), with ``tests/`` on PYTHONPATH.

These are deliberate test doubles of a *policy* (the thing under evaluation), not of any rollbench part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rollbench.core.contracts import Observation, PolicyInfo, TaskInfo
from rollbench.core.registry import make_policy


class NanOnSeed:
    """Delegates to ``options["inner"]`` but returns a NaN action at step ``options["step"]`` (default 3) of the
    episode whose seed is ``options["bad_seed"]``."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy(options.get("inner", "scripted-expert"), {})
        self.bad_seed = int(options["bad_seed"])
        self.bad_step = int(options.get("step", 3))
        self.info = PolicyInfo(name="nan-on-seed")
        self._seed = -1
        self._t = 0

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed, self._t = seed, 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        a = np.atleast_2d(self.inner.act(observation, instruction)).astype(np.float32)
        if self._seed == self.bad_seed and self._t == self.bad_step:
            a[:] = np.nan
        self._t += 1
        return a

    def close(self) -> None:
        self.inner.close()


def nan_on_seed(name: str, options: Mapping[str, Any]) -> NanOnSeed:
    return NanOnSeed(options)


class Overshoot:
    """For ``scripted/reach-final``: walks straight through the goal and keeps going in the same direction, so
    success is reached mid-episode and lost before the horizon."""

    def __init__(self) -> None:
        self.info = PolicyInfo(name="overshoot")
        self._dir = np.zeros(2, dtype=np.float32)

    def reset(self, task: TaskInfo, seed: int) -> None:
        self._dir = np.zeros(2, dtype=np.float32)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        s = observation.state
        if not self._dir.any():
            d = s[2:4] - s[0:2]
            self._dir = (d / np.abs(d).max() * 0.3).astype(np.float32)  # small steps: lands within 5 cm of goal
        return self._dir[None, :]

    def close(self) -> None:
        pass


def overshoot(name: str, options: Mapping[str, Any]) -> Overshoot:
    return Overshoot()


class Slow:
    """The scripted expert, sleeping ``options["sleep_s"]`` seconds (default 0.02) in every call."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        import time

        self._sleep, self._time = float(options.get("sleep_s", 0.02)), time
        self.inner = make_policy("scripted-expert", {})
        self.info = PolicyInfo(name="slow")

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        self._time.sleep(self._sleep)
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def slow(name: str, options: Mapping[str, Any]) -> Slow:
    return Slow(options)


class ShortBatch:
    """The scripted expert, natively batched, whose batched form answers one observation too few whenever it is
    asked for more than one (a policy server that drops a request). Single calls are answered correctly."""

    def __init__(self) -> None:
        self.info = PolicyInfo(name="short-batch")
        self.inner = make_policy("scripted-expert", {})

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.inner.act(observation, instruction)

    def batched(self, size: int) -> ShortBatch:
        return self

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act_batch(self, slots: Any, observations: Any, instructions: Any) -> list[Any]:
        answers = [self.inner.act(o, i) for o, i in zip(observations, instructions, strict=True)]
        return answers[:-1] if len(answers) > 1 else answers

    def close(self) -> None:
        pass


def short_batch(name: str, options: Mapping[str, Any]) -> ShortBatch:
    return ShortBatch()


class Hang:
    """The scripted expert, but ``act`` never returns (sleeps ``options["hang_s"]``, default an hour) on the episode
    whose seed is ``options["bad_seed"]`` (every episode if absent): a policy stuck in its own code."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        import time

        self._sleep, self._hang_s = time.sleep, float(options.get("hang_s", 3600.0))
        self.bad_seed = options.get("bad_seed")
        self.inner = make_policy("scripted-expert", {})
        self.info = PolicyInfo(name="hang")
        self._seed = -1

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed = seed

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        if self.bad_seed is None or self._seed == int(self.bad_seed):
            self._sleep(self._hang_s)
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def hang(name: str, options: Mapping[str, Any]) -> Hang:
    return Hang(options)


class ReuseBuffer:
    """The scripted expert (``options["inner"]``, default ``scripted-expert``) returning its action in the *same*
    array object every call, overwritten in place: a policy that reuses its output buffer."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy(options.get("inner", "scripted-expert"), {})
        self.info = PolicyInfo(name="reuse-buffer", chunk_size=self.inner.info.chunk_size)
        self._out: np.ndarray | None = None

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        a = np.atleast_2d(np.asarray(self.inner.act(observation, instruction), dtype=np.float32))
        if self._out is None or self._out.shape != a.shape:
            self._out = np.empty_like(a)
        self._out[...] = a
        return self._out

    def close(self) -> None:
        self.inner.close()


def reuse_buffer(name: str, options: Mapping[str, Any]) -> ReuseBuffer:
    return ReuseBuffer(options)


class FailOnSeeds:
    """The scripted expert, but ``reset`` raises ``InfrastructureError`` on the seeds in ``options["infra_seeds"]``
    while the file ``options["while_exists"]`` exists (a server that is down, then back), and a plain
    ``RuntimeError`` (the policy's own bug) on the seeds in ``options["policy_seeds"]``, always."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        from pathlib import Path

        self.inner = make_policy("scripted-expert", {})
        self.infra_seeds = {int(s) for s in options.get("infra_seeds", [])}
        self.policy_seeds = {int(s) for s in options.get("policy_seeds", [])}
        self.flag = Path(options["while_exists"])
        self.info = PolicyInfo(name="fail-on-seeds")

    def reset(self, task: TaskInfo, seed: int) -> None:
        from rollbench.core.contracts import InfrastructureError

        if seed in self.policy_seeds:
            raise RuntimeError(f"policy bug on seed {seed}")
        if seed in self.infra_seeds and self.flag.exists():
            raise InfrastructureError(f"policy server unreachable on seed {seed}")
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def fail_on_seeds(name: str, options: Mapping[str, Any]) -> FailOnSeeds:
    return FailOnSeeds(options)


class DieOnSeed:
    """The scripted expert, but the process running it is killed with SIGKILL at ``reset`` of the episode whose seed is
    ``options["bad_seed"]`` (a worker that dies: a segfault, the OOM killer). Use only with worker processes."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.bad_seed = int(options["bad_seed"])
        self.info = PolicyInfo(name="die-on-seed")

    def reset(self, task: TaskInfo, seed: int) -> None:
        import os
        import signal

        if seed == self.bad_seed:
            os.kill(os.getpid(), signal.SIGKILL)
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def die_on_seed(name: str, options: Mapping[str, Any]) -> DieOnSeed:
    return DieOnSeed(options)


class ExitsInAct:
    """The scripted expert, but its first ``act`` of the episodes whose seed is in ``options["bad_seeds"]`` ends the
    process running it: ``os._exit(0)`` (``options["how"] == "exit"``, the default) or ``os.abort()`` (``"abort"``,
    SIGABRT: a crash in native code). A policy hiding its failures by killing its worker, or one that crashes."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.bad_seeds = {int(s) for s in options["bad_seeds"]}
        self.how = str(options.get("how", "exit"))
        self.info = PolicyInfo(name="exits-in-act")
        self._seed = -1

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed = seed

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        import os

        if self._seed in self.bad_seeds:
            if self.how == "abort":
                os.abort()
            os._exit(0)
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def exits_in_act(name: str, options: Mapping[str, Any]) -> ExitsInAct:
    return ExitsInAct(options)


class Stateful:
    """The scripted expert at a speed set by its own episode state: ``0.4 + 0.3 * ((seed + t) % 3)`` of the expert's
    action, ``t`` counting this episode's calls since ``reset``. An instance whose state leaked into another
    episode (a served slot answered from another slot's session) acts differently, so its recorded actions differ."""

    def __init__(self) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.info = PolicyInfo(name="stateful", tasks=("scripted/*",))
        self._seed, self._t = -1, 0

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed, self._t = seed, 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        speed = 0.4 + 0.3 * ((self._seed + self._t) % 3)
        self._t += 1
        return (np.asarray(self.inner.act(observation, instruction), np.float32) * speed).astype(np.float32)

    def close(self) -> None:
        pass


def stateful(name: str, options: Mapping[str, Any]) -> Stateful:
    return Stateful()


class PolicyPanic(BaseException):
    """A ``BaseException`` that is neither ``Exception``, ``SystemExit`` nor ``KeyboardInterrupt``."""


RAISABLE: dict[str, type[BaseException]] = {
    "RuntimeError": RuntimeError,
    "SystemExit": SystemExit,
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "custom": PolicyPanic,
}


class RaiseOnSeed:
    """The scripted expert, but ``act`` raises ``RuntimeError("the policy failed on seed S")`` at call
    ``options["step"]`` (default 1) of the episode whose seed is ``options["bad_seed"]`` (default 2); the exception
    is RuntimeError or the one named by ``options["kind"]`` (a key of :data:`RAISABLE`)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.info = PolicyInfo(name="raise-on-seed", tasks=("scripted/*",))
        self.bad_seed, self.bad_step = int(options.get("bad_seed", 2)), int(options.get("step", 1))
        self.kind = RAISABLE[str(options.get("kind", "RuntimeError"))]
        self._seed, self._t = -1, 0

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed, self._t = seed, 0

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        self._t += 1
        if self._seed == self.bad_seed and self._t > self.bad_step:
            raise self.kind(f"the policy failed on seed {self._seed}")
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def raise_on_seed(name: str, options: Mapping[str, Any]) -> RaiseOnSeed:
    return RaiseOnSeed(options)


class Constant:
    """Returns ``options["action"]`` (default ``[0.5, 0.0]``, moving the point right) every step, as a numpy array
    of ``options["dtype"]`` (default float32; ``complex64`` for a complex action); says it needs camera images
    (``options["images"]``, default True), so the episode loop renders what it sees."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.action = np.asarray(options.get("action", [0.5, 0.0]), dtype=str(options.get("dtype", "float32")))
        self.info = PolicyInfo(name="constant", needs_images=bool(options.get("images", True)))

    def reset(self, task: TaskInfo, seed: int) -> None:
        pass

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.action.copy()

    def close(self) -> None:
        pass


def constant(name: str, options: Mapping[str, Any]) -> Constant:
    return Constant(options)


class LeavesChildren:
    """Delegates to ``scripted-expert``; on the first ``act`` call of each episode prints to stdout (Python and the raw
    descriptor), forks a child that sleeps ``options["sleep_s"]`` (default 60) and starts ``sleep`` the same way
    through ``subprocess``: children a careless policy leaves behind. Their pids are appended to
    ``options["pids"]`` (a file) so the test can end them."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.info = self.inner.info
        self.sleep_s = float(options.get("sleep_s", 60))
        self.pids = str(options["pids"])
        self._forked = False

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._forked = False

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        import os
        import subprocess
        import time

        print("policy says hello on stdout")
        os.write(1, b"policy writes to descriptor 1\n")
        if not self._forked:
            self._forked = True
            pid = os.fork()
            if pid == 0:
                time.sleep(self.sleep_s)
                os._exit(0)
            child = subprocess.Popen(["sleep", str(self.sleep_s)])
            with open(self.pids, "a") as f:
                f.write(f"{pid}\n{child.pid}\n")
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        self.inner.close()


def leaves_children(name: str, options: Mapping[str, Any]) -> LeavesChildren:
    return LeavesChildren(options)


class Barrier:
    """The scripted expert (its ``info`` too), whose first ``act`` waits until ``options["parties"]`` instances of this
    class have been built in any processes sharing the directory ``options["dir"]`` (each leaves a file there when
    built), polling every 10 ms for at most ``options.get("timeout_s", 120)`` seconds, then raising RuntimeError.

    Makes "every worker took part" hold however the machine's load orders the workers' start: no instance moves past
    its first step until all of them exist."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        import os
        import uuid
        from pathlib import Path

        self.inner = make_policy("scripted-expert", {})
        self.info = self.inner.info
        self.dir, self.parties = Path(str(options["dir"])), int(options["parties"])
        self.timeout_s = float(options.get("timeout_s", 120))
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / f"{os.getpid()}-{uuid.uuid4().hex}").touch()
        self._passed = False

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        import time

        deadline = time.monotonic() + self.timeout_s
        while not self._passed:
            self._passed = len(list(self.dir.iterdir())) >= self.parties
            if not self._passed and time.monotonic() > deadline:
                raise RuntimeError(f"barrier: {self.parties} instances not built within {self.timeout_s} s")
            if not self._passed:
                time.sleep(0.01)
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        self.inner.close()


def barrier(name: str, options: Mapping[str, Any]) -> Barrier:
    return Barrier(options)


class EndsProcessOnSeed:
    """The scripted expert, but ``act`` ends the whole process on the episode whose seed is ``options["bad_seed"]``,
    only while the file ``options["while_exists"]`` exists (so that the same spec resumes once it is removed):
    ``options["how"]`` ``"exit"`` calls ``os._exit(options["code"])`` (default 0: no exception, no atexit, no
    finally), ``"kill"`` sends the process SIGKILL. Use with one worker: it ends rollbench itself."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy("scripted-expert", {})
        self.bad_seed, self.marker = int(options["bad_seed"]), str(options["while_exists"])
        self.how, self.code = str(options.get("how", "exit")), int(options.get("code", 0))
        self.info = PolicyInfo(name="ends-process-on-seed")
        self._seed = -1

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)
        self._seed = seed

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        import os
        import signal

        if self._seed == self.bad_seed and os.path.exists(self.marker):
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(self.code)
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        pass


def ends_process_on_seed(name: str, options: Mapping[str, Any]) -> EndsProcessOnSeed:
    return EndsProcessOnSeed(options)


class Counted:
    """The scripted expert (its ``info`` too) that leaves a file ``built-<pid>-<n>`` in ``options["dir"]`` when built
    and ``closed-<pid>-<n>`` when closed: how many instances a run built, and whether each was closed; its close()
    then raises RuntimeError("close failed") when ``options["close_raises"]``."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        import os
        import uuid
        from pathlib import Path

        self.inner = make_policy("scripted-expert", {})
        self.info = self.inner.info
        self.dir, self.id = Path(str(options["dir"])), f"{os.getpid()}-{uuid.uuid4().hex}"
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / f"built-{self.id}").touch()
        self.close_raises = bool(options.get("close_raises", False))

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.inner.act(observation, instruction)

    def close(self) -> None:
        self.inner.close()
        (self.dir / f"closed-{self.id}").touch()
        if self.close_raises:
            raise RuntimeError("close failed")


def counted(name: str, options: Mapping[str, Any]) -> Counted:
    return Counted(options)


class FinishRaises:
    """``options["inner"]`` (default the scripted expert), whose ``finish_episode`` hook (called after the last step,
    as an agent's transcript is) raises ``RuntimeError("transcript store is full")``."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self.inner = make_policy(options.get("inner", "scripted-expert"), {})
        self.info = PolicyInfo(name="finish-raises")

    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner.reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        return self.inner.act(observation, instruction)

    def finish_episode(self, outcome: Mapping[str, Any]) -> Mapping[str, bytes]:
        raise RuntimeError("transcript store is full")

    def close(self) -> None:
        pass


def finish_raises(name: str, options: Mapping[str, Any]) -> FinishRaises:
    return FinishRaises(options)
