"""What ``--executor ray`` asks of a cluster (:class:`RayOptions`): per-worker resources, placement, where the policy
lives and whether the run directory is shared. None of it is part of the spec: the same episodes are recorded on any
cluster. Validated on construction (ConfigError, exit 2, naming the flag). No ``ray`` import here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rollbench.core.contracts import ConfigError
from rollbench.core.format import quoted
from rollbench.core.jsonfile import JsonRefused, loads_strict
from rollbench.record.shipping import MAX_EPISODE_BYTES

PLACEMENTS = ("spread", "pack")
POLICY_PLACES = ("worker", "node")
MAX_RESOURCES = 32  # custom resource names per worker
MAX_QUANTITY = 1e14  # Ray's largest quantity of one resource on a node (ray_constants.MAX_RESOURCE_QUANTITY)
MIN_FRACTION = 1e-4  # Ray's resolution of fractional quantities: a smaller non-zero request is refused by Ray


def check_quantity(flag: str, amount: object, *, zero: bool) -> None:
    """ConfigError naming ``flag`` unless ``amount`` is a finite number Ray can schedule: at most
    :data:`MAX_QUANTITY`, non-zero amounts at least :data:`MIN_FRACTION` (``zero``: whether 0 is allowed)."""
    number = isinstance(amount, int | float) and not isinstance(amount, bool)
    if number and math.isfinite(amount) and ((amount == 0 and zero) or MIN_FRACTION <= amount <= MAX_QUANTITY):  # type: ignore[arg-type,operator]
        return
    low = f"0 or a number from {MIN_FRACTION:g}" if zero else f"a number from {MIN_FRACTION:g}"
    shown = f"{amount:g}" if number else repr(amount)
    raise ConfigError(f"{flag} must be {low} to {MAX_QUANTITY:g} (Ray's limits), got {shown}")


@dataclass(frozen=True)
class RayOptions:
    """Resources and placement of the Ray actors of a run.

    Attributes:
        cpus: logical CPUs per env worker (``--ray-cpus``, 0.0001 to 1e14, fractional allowed; default 1).
        gpus: GPUs for each copy of the policy (``--ray-gpus``, 0 or 0.0001 to 1e14; fractional below 1): the
            env worker's with ``policy="worker"``, the node's policy actor's with ``policy="node"``. The policy's
            device follows the GPU Ray assigned (``CUDA_VISIBLE_DEVICES``, set by Ray in the actor).
        resources: custom Ray resources per env worker (``--ray-resources '{"libero": 1}'``), name -> amount (0 or
            0.0001 to 1e14).
        placement: ``spread`` (actors over as many nodes as possible, Ray's ``SPREAD``) or ``pack`` (fill a node
            before the next, a ``PACK`` placement group of one bundle per worker).
        policy: ``worker`` (each env worker builds its own policy) or ``node`` (``--ray-policy-per-node``: one policy
            actor per node answers every env worker placed there through the batched path).
        shared_fs: ``--ray-shared-fs``: actors that see the driver's run directory at the same path stage episodes
            straight into it (checked per actor with a token file); all others ship their episodes to the driver.
        max_episode_bytes: the largest episode a worker may ship (default 1 GiB); a larger one is an error episode.
    """

    cpus: float = 1.0
    gpus: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)
    placement: str = "spread"
    policy: str = "worker"
    shared_fs: bool = False
    max_episode_bytes: int = MAX_EPISODE_BYTES

    def __post_init__(self) -> None:
        check_quantity("--ray-cpus", self.cpus, zero=False)
        check_quantity("--ray-gpus", self.gpus, zero=True)
        if self.gpus > 1 and not float(self.gpus).is_integer():
            raise ConfigError(f"--ray-gpus above 1 must be a whole number (Ray's rule), got {self.gpus:g}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"unknown --ray-placement {self.placement!r}; valid: {', '.join(PLACEMENTS)}")
        if self.policy not in POLICY_PLACES:
            raise ConfigError(f"unknown Ray policy place {self.policy!r}; valid: {', '.join(POLICY_PLACES)}")
        check_resources(self.resources)
        if not 1 <= self.max_episode_bytes <= 8 * MAX_EPISODE_BYTES:
            raise ConfigError(f"max_episode_bytes must be between 1 and {8 * MAX_EPISODE_BYTES}")

    def record(self) -> dict[str, Any]:
        """The options as run.json's ``executions[].ray`` records them."""
        return {
            "cpus": self.cpus,
            "gpus": self.gpus,
            "resources": dict(self.resources),
            "placement": self.placement,
            "policy": self.policy,
            "shared_fs": self.shared_fs,
        }


def check_resources(resources: object) -> None:
    """ConfigError unless ``resources`` maps at most :data:`MAX_RESOURCES` resource names to amounts Ray can
    schedule (:func:`check_quantity`; ``CPU``/``GPU`` go through ``--ray-cpus``/``--ray-gpus``)."""
    if not isinstance(resources, dict):
        raise ConfigError("--ray-resources must be a JSON object of name -> amount, e.g. '{\"libero\": 1}'")
    if len(resources) > MAX_RESOURCES:
        raise ConfigError(f"--ray-resources names {len(resources)} resources; at most {MAX_RESOURCES}")
    for name, amount in resources.items():
        if not isinstance(name, str) or not 1 <= len(name) <= 100 or not name.isprintable():
            raise ConfigError(f"--ray-resources: {quoted(str(name))} is not a resource name")
        if name in ("CPU", "GPU", "memory", "object_store_memory"):
            raise ConfigError(f"--ray-resources: ask for {name} with --ray-cpus/--ray-gpus, not here")
        check_quantity(f"--ray-resources: {name}", amount, zero=True)


def parse_resources(text: str | None) -> dict[str, float]:
    """``--ray-resources JSON`` as a dict (empty for None); ConfigError naming the flag on bad JSON."""
    if not text:
        return {}
    try:
        value = loads_strict(text)
    except JsonRefused as exc:
        raise ConfigError(f"--ray-resources is not JSON: {exc}") from None
    check_resources(value)
    return {k: float(v) for k, v in value.items()}
