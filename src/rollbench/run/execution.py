"""How to run a plan (not part of the run's identity): :class:`Execution`, validated once when it is built."""

from __future__ import annotations

from dataclasses import dataclass, field

from rollbench.core.contracts import ConfigError
from rollbench.core.spec import MAX_BATCH_SIZE, MAX_WORKERS
from rollbench.record.retry import check_mode
from rollbench.run.ray_options import MAX_QUANTITY, RayOptions

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Execution:
    """How to run (not part of the run's identity): worker count, executor, and episodes per worker in lockstep
    (``batch_size``, see :mod:`rollbench.run.lockstep`). None of these changes what an episode records.
    ``retry_errors`` says which errored episodes a resume re-runs: ``infra``, ``all`` or ``none`` (see
    :mod:`rollbench.record.retry`). ``ray``: resources, placement and policy place of Ray actors
    (:class:`~rollbench.run.ray_options.RayOptions`; only with ``executor="ray"``)."""

    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    batch_size: int = 1
    retry_errors: str = "infra"
    ray: RayOptions = field(default_factory=RayOptions)

    def __post_init__(self) -> None:
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ConfigError(f"--workers must be between 1 and {MAX_WORKERS}, got {self.workers}")
        if not 1 <= self.batch_size <= MAX_BATCH_SIZE:
            raise ConfigError(f"--batch-size must be between 1 and {MAX_BATCH_SIZE}, got {self.batch_size}")
        if self.executor not in EXECUTORS:
            raise ConfigError(f"unknown executor {self.executor!r}; valid executors: {', '.join(EXECUTORS)}")
        if self.ray_address and self.executor != "ray":
            raise ConfigError("--ray-address only applies to --executor ray")
        if self.ray != RayOptions() and self.executor != "ray":
            raise ConfigError("--ray-cpus/--ray-gpus/--ray-resources/--ray-placement only apply to --executor ray")
        check_mode(self.retry_errors)
        if self.executor == "ray":
            self._check_totals()

    def _check_totals(self) -> None:
        """A private Ray instance holds every worker's request at once: each total within Ray's limit."""
        asked = {"--ray-cpus": self.ray.cpus, **{f"--ray-resources: {k}": v for k, v in self.ray.resources.items()}}
        for flag, amount in asked.items():
            if amount * self.workers > MAX_QUANTITY:
                raise ConfigError(
                    f"{flag} {amount:g} × --workers {self.workers} is more than Ray can hold ({MAX_QUANTITY:g})"
                )
