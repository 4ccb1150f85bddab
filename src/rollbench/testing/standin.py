"""``gpu-standin``: a model of GPU inference for throughput benchmarks, not a policy anyone evaluates.

A VLA on a GPU answers a batch of 8-64 observations in about the time of one: the cost of a forward pass is
dominated by fixed work (weights streamed through the GPU), not by the batch size. This policy models exactly that:
every call, single or batched, sleeps ``latency_ms`` (default 50 ms, a typical π0-class action-chunk call) once, then
returns the actions of an ``inner`` policy (default ``zero``; ``metaworld-expert`` makes episodes succeed). Its
results are therefore those of ``inner`` and its timing that of a batch-size-independent model call, so
``eval --batch-size B`` throughput against it shows what batching buys a GPU policy (``benchmarks/bench_batch.py``).
Served by ``rollbench serve-policy --max-batch N``, every gathered batch is one ``act_batch`` call (one sleep), one
slot per client session; slots' ``inner`` instances are built at their first reset.

Options: ``latency_ms`` (float from 0 to 60,000: :data:`MAX_LATENCY_MS`), ``inner`` (a policy name).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rollbench.core.contracts import ConfigError, Observation, Policy, PolicyInfo, TaskInfo
from rollbench.core.latency import MAX_FIXED_MS

OPTIONS = ("latency_ms", "inner")
MAX_LATENCY_MS = MAX_FIXED_MS  # a minute per call, as --latency fixed:MS: a longer sleep models no GPU (hostile13 F10)


class StandinGPU:
    """Sleeps ``latency`` seconds per call (whatever the batch size), then answers with ``inner``'s actions."""

    def __init__(self, name: str, latency_s: float, inner: list[Policy]) -> None:
        self.latency_s = latency_s
        self.inner = inner
        first = inner[0].info
        self.info = PolicyInfo(
            name=name,
            chunk_size=first.chunk_size,
            replan_every=first.replan_every,
            needs_images=first.needs_images,
            tasks=first.tasks,  # it drives what its inner policy drives
            provenance={"inner": first.name, "latency_ms": latency_s * 1000, "model_of": "batched GPU inference"},
        )
        self._build: Any = None
        self.slots = 1

    # single-observation form (batch size 1)
    def reset(self, task: TaskInfo, seed: int) -> None:
        self.inner[0].reset(task, seed)

    def act(self, observation: Observation, instruction: str) -> np.ndarray:
        time.sleep(self.latency_s)
        return np.asarray(self.inner[0].act(observation, instruction))

    # native batched form
    def batched(self, size: int) -> StandinGPU:
        """This policy with ``size`` slots (one ``inner`` instance each, built at the slot's first reset) answering
        a whole batch in one sleep."""
        self.slots = size
        return self

    def reset_slot(self, slot: int, task: TaskInfo, seed: int) -> None:
        if not 0 <= slot < max(self.slots, 1):
            raise ValueError(f"gpu-standin: slot {slot} out of range 0..{self.slots - 1}")
        while len(self.inner) <= slot:
            self.inner.append(self._build())
        self.inner[slot].reset(task, seed)

    def act_batch(
        self, slots: Sequence[int], observations: Sequence[Observation], instructions: Sequence[str]
    ) -> list[np.ndarray | BaseException]:
        time.sleep(self.latency_s)
        answers: list[np.ndarray | BaseException] = []
        for slot, obs, instruction in zip(slots, observations, instructions, strict=True):
            try:
                answers.append(np.asarray(self.inner[slot].act(obs, instruction)))
            except Exception as exc:
                answers.append(exc)
        return answers

    def close(self) -> None:
        for p in self.inner:
            p.close()


def make_standin(name: str, options: Mapping[str, Any]) -> StandinGPU:
    """A fixed-latency model of batched GPU inference for throughput benchmarks: every call, single or batched, sleeps
    ``latency_ms`` (default 50) once, then answers with the ``inner`` policy's actions (default ``zero``)."""
    from rollbench.core.registry import make_policy

    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError(f"gpu-standin: unknown options {unknown}; valid options: {', '.join(OPTIONS)}")
    try:
        latency_s = float(options.get("latency_ms", 50.0)) / 1000.0
    except (TypeError, ValueError):
        raise ConfigError(f"gpu-standin: latency_ms must be a number, got {options.get('latency_ms')!r}") from None
    if not 0 <= latency_s <= MAX_LATENCY_MS / 1000.0:
        raise ConfigError(
            f"gpu-standin: latency_ms must be from 0 to {MAX_LATENCY_MS}, got {options.get('latency_ms')!r}"
        )
    inner_name = str(options.get("inner", "zero"))
    try:
        first = make_policy(inner_name, {})
    except ConfigError as exc:
        raise ConfigError(f"gpu-standin: option inner: {exc}") from None
    policy = StandinGPU(name, latency_s, [first])
    policy._build = lambda: make_policy(inner_name, {})
    return policy
