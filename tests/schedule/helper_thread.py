"""Test doubles around the schedule's helper thread: a counting helper and fixed ways."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from clusterclip.threads import FasterWay


class CountingHelper(ThreadPoolExecutor):
    """A real one-thread helper that counts the tasks it was given."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)
        self.tasks = 0

    def submit(self, *args, **kwargs):
        self.tasks += 1
        return super().submit(*args, **kwargs)


class FixedWays(FasterWay):
    """Every segment (window) on the helper thread, or one in two, whatever the times."""

    def __init__(self, ways: str) -> None:
        super().__init__()
        self.ways = ways

    def choose(self) -> int:
        self.calls += 1
        return 1 if self.ways == "helper" else self.calls % 2
