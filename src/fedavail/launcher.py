"""Process-level settings that must be in place before Python starts.

glibc's malloc hands freed blocks back to the OS and page-faults them in again on every training step; keeping them
(no trimming, no mmap for blocks under 32 MiB) made a FedSWE SVHN CNN round 20% faster on CPU (benchmarks/round_cost.py:
3.49 s against 4.39 s). malloc reads these variables once, at start-up: the train rule sets them in the job's
environment (`malloc_assignments`), and the benchmarks re-execute themselves with them (`ensure_malloc_settings`)."""

import os
import sys

MALLOC_SETTINGS = {"MALLOC_TRIM_THRESHOLD_": str(4 << 30), "MALLOC_MMAP_THRESHOLD_": str(32 << 20)}


def malloc_assignments() -> str:
    """MALLOC_SETTINGS as shell variable assignments, to prefix a command with."""
    return " ".join(f"{key}={value}" for key, value in MALLOC_SETTINGS.items())


def ensure_malloc_settings(command: list[str]) -> None:
    """Re-execute `command` (this process's own command line) with MALLOC_SETTINGS, unless already set or not glibc."""
    if not sys.platform.startswith("linux") or all(key in os.environ for key in MALLOC_SETTINGS):
        return
    for key, value in MALLOC_SETTINGS.items():
        os.environ.setdefault(key, value)
    os.execv(command[0], command)
