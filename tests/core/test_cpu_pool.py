"""The cores the process may run on (service/core/cpu_pool.py)."""

from __future__ import annotations

from typing import Any

import pytest

from service.core import cpu_pool


@pytest.mark.parametrize(("files", "cpus"), [
    ({"cpu.max": "200000 100000\n"}, 2.0),                      # cgroup v2: a container limited to 2 CPUs
    ({"cpu.max": "max 100000\n"}, None),                        # v2, no limit
    ({"cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 1.5),   # v1
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),      # v1, no limit
    ({}, None),                                                 # no cgroup files at all
])
def test_a_containers_cpu_limit_is_read_from_its_cgroup(tmp_path: Any, files: dict[str, str],
                                                        cpus: float | None) -> None:
    # the serving solve splits over the cores the process may use: a container sees its host's cores, but
    # its CPU limit is what it can run on
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cpu_pool.cgroup_cpus(tmp_path) == cpus


def test_usable_cores_are_the_affinity_within_the_cpu_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = cpu_pool.usable_cores()
    monkeypatch.setattr(cpu_pool, "cgroup_cpus", lambda: 0.5)      # half a CPU: one thread still
    assert cpu_pool.usable_cores() == 1
    monkeypatch.setattr(cpu_pool, "cgroup_cpus", lambda: 1000.0)   # a limit above the cores: the cores
    assert cpu_pool.usable_cores() == cores >= 1
