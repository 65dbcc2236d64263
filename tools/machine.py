"""What a benchmark ran on, for its recorded results."""

from __future__ import annotations

import os
import platform


def describe() -> str:
    """Architecture, CPU model and vCPU count, e.g. 'x86_64, AMD EPYC, 2 vCPUs'."""
    model = "unknown CPU"
    with open("/proc/cpuinfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{platform.machine()}, {model}, {os.cpu_count()} vCPUs"
