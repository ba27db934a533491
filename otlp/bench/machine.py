"""The machine a benchmark ran on, for the report ([GR] Appendix M names its CPUs)."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("numpy", "scipy", "highspy", "ortools", "networkx", "numba", "pot", "dask")


def machine_info() -> dict[str, Any]:
    """CPU model, core counts, memory, OS, Python and the solver packages' versions."""
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
    }


def describe_machine(info: dict[str, Any]) -> str:
    """One line, e.g. "Intel(R) Xeon(R) Processor, 2 cores, 23.4 GiB, Linux-6.1 (Python 3.11)"."""
    memory = f", {info['memory_gib']:.1f} GiB" if info.get("memory_gib") else ""
    return (
        f"{info['cpu_model']}, {info['usable_cores'] or info['logical_cores']} cores{memory}, "
        f"{info['platform']} (Python {info['python']})"
    )


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _memory_gib() -> float | None:
    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        return None
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 2**20
    return None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
