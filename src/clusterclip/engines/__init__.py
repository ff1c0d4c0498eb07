"""Execution engines for the embed stage and the assignment step of the cluster stage.

A stage describes *what* to compute (an :class:`~clusterclip.embed.EncoderSpec`
and a stream of document shards; centroids and the embedding shard files); an
engine decides *where* it runs. ``"local"`` runs in-process and lives with each
stage; ``"ray"`` (:mod:`clusterclip.engines.ray_engine`) runs the same per-shard
and per-block functions on a Ray cluster. Both write the same work directory,
so a run can switch engines and still resume.

Nothing heavy is imported here: Ray loads only when the Ray engine runs.
"""

from __future__ import annotations

__all__ = ["ENGINES"]

#: Engine names accepted by ``clusterclip.embed(engine=...)`` and the assignment step.
ENGINES = ("local", "ray")
