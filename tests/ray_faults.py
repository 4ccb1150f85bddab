"""A Ray env actor whose replies go bad, for the tests of the driver's checks (loaded by the worker nodes by name,
with ``tests/`` on their PYTHONPATH). A deliberate fault injector standing in for a broken network, object store or
worker: it runs the real :class:`rollbench.run.ray_actor.EpisodeActor` and damages only what it sends back.

Episode 1's reply has one byte of its data file flipped after the checksum was taken; episode 2's reply carries
5 MB more data with a matching checksum (so only the driver's size bound can refuse it).
"""

from __future__ import annotations

import dataclasses

from rollbench.core.plan import PlannedEpisode
from rollbench.record.shipping import ShippedEpisode, digest_of
from rollbench.run.ray_actor import EpisodeActor
from rollbench.run.worker import EpisodeSummary


class CorruptingActor(EpisodeActor):
    def run(self, planned: PlannedEpisode) -> tuple[EpisodeSummary, ShippedEpisode | None]:
        summary, shipped = super().run(planned)
        assert shipped is not None
        files = dict(shipped.files)
        if planned.episode_index == 1:
            data = bytearray(files["data.parquet"])
            data[len(data) // 2] ^= 0xFF
            files["data.parquet"] = bytes(data)
            return summary, dataclasses.replace(shipped, files=files)
        if planned.episode_index == 2:
            files["episode.json"] += b" " * 5_000_000
            return summary, dataclasses.replace(shipped, files=files, digest=digest_of(files))
        return summary, shipped
