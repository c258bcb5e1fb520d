"""What a bench reports of the host process that ran it (a wall-clock figure, named in wall_clock_fields)."""

from __future__ import annotations

import resource


def peak_mb() -> float:
    """Peak resident memory of this process so far, MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
