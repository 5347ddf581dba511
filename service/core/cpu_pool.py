"""The cores the process may run on, and the thread pool that splits a large serving solve over them."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def cgroup_cpus(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPUs the process's control group allows (a container's CPU limit), when it sets one: cgroup v2's
    ``cpu.max`` ("quota period", or "max" for none), else v1's ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``
    (-1 for none). A container sees every core of its host, but may run on only as many as its limit."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


def usable_cores() -> int:
    """Cores the process may run on: its CPU affinity, within its control group's CPU limit."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpus()
    return max(1, min(cores, int(limit)) if limit else cores)


# Solves of at least twice this many candidates are split over the cores: a part must take several times
# what handing a task to a pool thread and back costs (benchmarks/search_speed.py shows the effect).
# Two chunks per core rather than one: a thread the machine sets aside for a while (other processes on the
# cores) then holds up a smaller share of the solve, at a small cost when the machine is idle.
SPLIT_MIN_CANDIDATES = 1024
CHUNKS_PER_CORE = 2
CORES = usable_cores()
_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=CORES - 1, thread_name_prefix="serve-solve"))
        return _POOL[0]


def run_parts(n: int, part: Callable[[int, int], None]) -> None:
    """``part(a, b)`` over consecutive ranges that cover 0..n-1: one call below 2 x ``SPLIT_MIN_CANDIDATES``
    items or on one core, else ``CHUNKS_PER_CORE`` chunks per core run by the caller's thread and the pool's.
    ``part`` must release the GIL for the split to pay (compiled ``nogil`` kernels and numpy do)."""
    chunks = min(CORES * CHUNKS_PER_CORE, n // SPLIT_MIN_CANDIDATES)
    if CORES <= 1 or chunks <= 1:
        part(0, n)
        return
    # the threads take chunks in turn until none is left: a thread the machine does not run for a while holds
    # up at most the chunk it has begun, not a fixed share
    cut = [n * k // chunks for k in range(chunks + 1)]
    taken = itertools.count()          # next() on it is atomic under the GIL

    def drain() -> None:
        while (k := next(taken)) < chunks:
            part(cut[k], cut[k + 1])

    helpers = [_pool().submit(drain) for _ in range(min(CORES, chunks) - 1)]
    drain()
    for f in helpers:
        f.result()
