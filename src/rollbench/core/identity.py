"""Run and episode identities: ``host/robot/name`` and ``host/robot/name/episode_index``.

A run's identity is recorded in ``run.json`` under ``"identity"`` as ``{"host", "robot", "name"}``. ``host`` is the
recording machine's name (or ``eval --host-label``), ``robot`` the embodiment the env family declares (or
``eval --robot``), ``name`` the run directory's name. Every segment matches :data:`SEGMENT_PATTERN`, so an identity
is safe as a URL path and as a file-name component. This is distinct from ``run.json``'s ``spec_identity`` (a hash of
the EvalSpec, which says whether two runs record the same episodes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rollbench.core.contracts import ConfigError

if TYPE_CHECKING:
    from rollbench.core.runlog_model import RunLog

SEGMENT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_SEGMENT = re.compile(SEGMENT_PATTERN)


def check_segment(value: str, what: str) -> str:
    """Return ``value`` if it is a valid identity segment, else raise ConfigError naming ``what`` and the rule."""
    if not isinstance(value, str) or not _SEGMENT.fullmatch(value) or len(value) > 200:
        raise ConfigError(
            f"{what} {value!r} is not a valid identity segment: it must match {SEGMENT_PATTERN} "
            "(letters, digits, '.', '_', '-'; not starting with '.', '_' or '-'), at most 200 characters"
        )
    return value


def sanitize_segment(value: str, fallback: str = "unknown", limit: int = 200) -> str:
    """Make a valid segment from free text (a host name, a run directory's name): every run of invalid characters
    becomes one ``-``, leading ``.``/``_``/``-`` are dropped, then at most ``limit`` characters (<= 200) are kept;
    ``fallback`` when nothing valid is left. The one sanitiser of names rollbench derives: identity segments, default
    run directory names (:func:`rollbench.api.default_run_dir`), an instruction search's round runs."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", value or "").lstrip("._-")[: min(limit, 200)]
    return cleaned if cleaned and _SEGMENT.fullmatch(cleaned) else fallback


@dataclass(frozen=True)
class RunIdentity:
    """``host/robot/name`` of one run. Each segment is validated on construction (ConfigError)."""

    host: str
    robot: str
    name: str

    def __post_init__(self) -> None:
        check_segment(self.host, "host")
        check_segment(self.robot, "robot")
        check_segment(self.name, "run name")

    @property
    def key(self) -> str:
        """``host/robot/name``."""
        return f"{self.host}/{self.robot}/{self.name}"

    def episode_key(self, episode_index: int) -> str:
        """``host/robot/name/episode_index``: the key of one episode (labels, URLs)."""
        return f"{self.key}/{int(episode_index)}"

    def to_dict(self) -> dict[str, str]:
        return {"host": self.host, "robot": self.robot, "name": self.name}

    @classmethod
    def from_run_log(cls, log: RunLog, run_dir: Path) -> RunIdentity:
        """The identity a run recorded; for runs recorded before identities existed, one derived from what they
        did record (provenance host, ``unknown`` robot, the directory's name). The name is always the directory's
        current name, so a renamed or copied run directory is a different run."""
        recorded = log.identity
        host = (recorded.host if recorded else "") or sanitize_segment(log.provenance.host)
        robot = (recorded.robot if recorded else "") or "unknown"
        return cls(host=str(host), robot=str(robot), name=sanitize_segment(run_dir.name, "run"))


def identity_for_reading(log: RunLog, run_dir: Path) -> RunIdentity:
    """The identity a reader of many runs files a run under: :meth:`RunIdentity.from_run_log`, or, when the run
    records a host or robot that is not a segment (a damaged run: grade names it as a violation), those segments
    sanitised (:func:`sanitize_segment`) so the run can still be named, marked damaged and skipped while the runs
    beside it are read."""
    try:
        return RunIdentity.from_run_log(log, run_dir)
    except ConfigError:
        recorded = log.identity
        host = (recorded.host if recorded else "") or log.provenance.host
        robot = (recorded.robot if recorded else "") or "unknown"
        return RunIdentity(sanitize_segment(host), sanitize_segment(robot), sanitize_segment(run_dir.name, "run"))


def default_host() -> str:
    """This machine's name as an identity segment (``socket.gethostname()``, invalid characters replaced)."""
    import socket

    return sanitize_segment(socket.gethostname(), "localhost")


def family_robot(family_name: str) -> str:
    """The embodiment an env family declares (its ``robot`` attribute; ``unknown`` when it declares none)."""
    from rollbench.core.registry import env_family

    family = env_family(family_name)
    robot = family.robot if family is not None else None
    return sanitize_segment(str(robot), "unknown") if robot else "unknown"


def run_identity(
    run_dir: Path, families: list[str], host_label: str | None = None, robot: str | None = None
) -> RunIdentity:
    """The identity of a new run in ``run_dir``: ``host_label`` or this machine's name; ``robot`` or the robot the
    tasks' families declare (``mixed`` when they declare different ones); the directory's name.

    Raises:
        ConfigError: ``host_label`` or ``robot`` is not a valid segment.
    """
    if host_label is not None:
        check_segment(host_label, "--host-label")
    if robot is not None:
        check_segment(robot, "--robot")
    robots = sorted({family_robot(f) for f in families}) or ["unknown"]
    return RunIdentity(
        host=host_label or default_host(),
        robot=robot or (robots[0] if len(robots) == 1 else "mixed"),
        name=sanitize_segment(run_dir.name, "run"),
    )
