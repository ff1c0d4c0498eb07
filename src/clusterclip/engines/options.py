"""The one set of Ray options, shared by every stage that runs on Ray.

Pure data and validation: importing this module does not import Ray.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from clusterclip.errors import invalid
from clusterclip.options import option

__all__ = ["DEFAULT_TASKS_PER_WORKER", "RayOptions"]

#: Tasks per worker handed to Ray ahead of the results when ``max_in_flight`` is not given.
DEFAULT_TASKS_PER_WORKER = 4


@dataclass(frozen=True)
class RayOptions:
    """Where and how wide a Ray job runs (the ``engine_options`` of ``engine="ray"``).

    Parameters
    ----------
    address : str or None
        Ray cluster to join (``"auto"``, ``"HOST:6379"``, ``"ray://HOST:10001"``).
        ``None`` joins the cluster named by ``RAY_ADDRESS`` or the last one
        started on this machine, else starts a local instance.
    num_workers : int or None
        Actors in the pool. ``None``: one per GPU of the cluster when
        ``num_gpus_per_worker > 0``, else one per CPU.
    num_gpus_per_worker : float
        GPUs reserved by each actor (``0`` runs on CPUs; ``1`` is one model per GPU).
    num_cpus_per_worker : float
        CPUs reserved by each actor.
    num_cpus : int or None
        CPUs of a *locally started* instance (ignored when joining a cluster).
    max_in_flight : int or None
        Tasks (shards, blocks) handed to Ray ahead of the results received;
        bounds what the object store holds. ``None``: 4 per worker.

    Examples
    --------
    >>> RayOptions(num_workers=4, num_gpus_per_worker=1).num_workers
    4
    >>> RayOptions.from_mapping({"num_workers": 2}).num_workers
    2
    """

    address: str | None = option(
        None,
        "Ray cluster address: auto, HOST:6379, ray://HOST:10001 (default: join the running "
        "local one or start one).",
        flag="--ray-address",
    )
    num_workers: int | None = option(
        None,
        "Ray actors; each builds its worker once (default: one per GPU, else per CPU).",
        kind="int",
        minimum=1,
    )
    num_gpus_per_worker: float = option(
        0.0, "GPUs reserved by each Ray actor (1: one model per GPU).", kind="float", minimum=0
    )
    num_cpus_per_worker: float = option(
        1.0, "CPUs reserved by each Ray actor.", kind="float", minimum=0
    )
    num_cpus: int | None = option(
        None, "CPUs of a locally started Ray instance.", kind="int", minimum=1
    )
    max_in_flight: int | None = option(
        None,
        "Tasks handed to Ray ahead of the results received (default: 4 per worker).",
        kind="int",
        minimum=1,
    )

    def __post_init__(self) -> None:
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise invalid(
                "ray_address",
                "a Ray address such as 'auto' or 'HOST:6379', or None",
                self.address,
                "Omit it to start or join a local Ray instance.",
            )
        _check_count("num_workers", self.num_workers, "Omit it to use every GPU or CPU.")
        _check_count("num_cpus", self.num_cpus, "Omit it to let Ray count the CPUs.")
        _check_count("max_in_flight", self.max_in_flight, "Omit it for 4 tasks per worker.")
        for name in ("num_gpus_per_worker", "num_cpus_per_worker"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise invalid(name, "a number >= 0", value, f"Pass e.g. {name}=1.")
        if self.num_cpus_per_worker == 0 and self.num_gpus_per_worker == 0:
            raise invalid(
                "num_cpus_per_worker",
                "> 0 when num_gpus_per_worker is 0",
                self.num_cpus_per_worker,
                "Each worker must reserve a CPU or a GPU.",
            )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RayOptions:
        """Build the options from the public ``engine_options`` dict; unknown keys are refused."""
        known = [field.name for field in fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise invalid(
                "engine_options",
                f"a mapping with keys among {known}",
                dict(options),
                f"Drop {unknown}.",
            )
        return cls(**dict(options))

    def engine_options(self) -> dict[str, Any]:
        """The settings that differ from the defaults, as an ``engine_options`` dict.

        >>> RayOptions(num_workers=4).engine_options()
        {'num_workers': 4}
        """
        default = type(self)()
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        }

    def window(self, pool_size: int) -> int:
        """Tasks in flight at most for a pool of ``pool_size`` workers."""
        return self.max_in_flight or DEFAULT_TASKS_PER_WORKER * pool_size


def _check_count(name: str, value: Any, fix: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise invalid(name, "an int in [1, inf) or None", value, fix)
