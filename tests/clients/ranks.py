"""Launch one Python module as W real ranks on this machine (gloo on the loopback).

Used by the client checks, which run inside a client's own environment
(``.venvs/streaming``, ``.venvs/litdata``): each rank is a separate process
with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` set, as
``torchrun`` would set them, and joins a ``torch.distributed`` gloo group.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_ranks(module: str, args: list[str], *, world_size: int, timeout: float = 600) -> None:
    """Run ``python -m module *args`` as ``world_size`` ranks; raise if any fails."""
    port = str(free_port())
    processes = []
    for rank in range(world_size):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_WORLD_SIZE": str(world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
        }
        processes.append(subprocess.Popen([sys.executable, "-m", module, *args], env=env))
    codes = []
    for process in processes:
        try:
            codes.append(process.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            raise
    if any(codes):
        raise SystemExit(f"ranks of {module} {' '.join(args)} exited with {codes}")


def join_group() -> tuple[int, int]:
    """Join the gloo group of :func:`run_ranks`; returns (rank, world_size)."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size()


def save(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj), encoding="utf-8")


def load(path: Path) -> Any:
    return json.loads(path.read_text("utf-8"))
