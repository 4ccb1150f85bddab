"""A local run's episode as the dashboard keeps it: the graded episode (:class:`~rollbench.core.grade_model.GradedEpisode`),
the instruction its episode row recorded, and the links to its files (:class:`Artifacts`). Built once per grading by
:func:`rollbench.dashboard.catalog.read_run` and read as attributes; :meth:`ReviewEpisode.to_json` is its form in
the dashboard's on-disk cache of graded runs (the graded episode's JSON with ``instruction`` replaced and
``artifacts`` added)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rollbench.core.grade_model import GradedEpisode
from rollbench.core.records import JsonRecord


@dataclass(frozen=True)
class VideoLink(JsonRecord):
    """One camera's clip: ``path`` relative to the run directory (``info.json``'s ``video_path`` filled from the
    episode row), whether that file is there (``ready``), the clip's ``from_s``..``to_s`` (seconds) in it, and the
    file's ``size`` in bytes (None when it is not there; a central dashboard checks its cached copy against it)."""

    path: str
    ready: bool
    from_s: float | None
    to_s: float | None
    size: int | None = None


@dataclass(frozen=True)
class Artifacts(JsonRecord):
    """The episode's files, as paths relative to the run directory: ``videos`` (camera -> clip), the agent
    ``transcript`` (None without one) and the step file holding its rows (``data``; None without steps)."""

    videos: dict[str, VideoLink] = field(default_factory=dict)
    transcript: str | None = None
    data: str | None = None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Artifacts:
        """The artifacts from their :meth:`to_dict` form (the dashboard's cache); KeyError/TypeError when malformed."""
        videos = {str(cam): VideoLink(**v) for cam, v in doc["videos"].items()}
        return cls(videos, doc["transcript"], doc["data"])


@dataclass(frozen=True)
class ReviewEpisode:
    """A graded episode with the instruction its episode row recorded (None when the row has none) and its files."""

    graded: GradedEpisode
    instruction: str | None
    artifacts: Artifacts

    @property
    def episode_index(self) -> int:
        return self.graded.episode_index

    def to_json(self) -> dict[str, object]:
        """The graded episode's JSON, its ``instruction`` the recorded one, then ``artifacts``."""
        return {**self.graded.to_json(), "instruction": self.instruction, "artifacts": self.artifacts.to_dict()}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ReviewEpisode:
        """The episode from its :meth:`to_json` form; ValueError (pydantic's), KeyError or TypeError when malformed."""
        graded = GradedEpisode.model_validate({k: v for k, v in doc.items() if k != "artifacts"})
        return cls(graded, doc["instruction"], Artifacts.from_json(doc["artifacts"]))
