"""Named crash points, for drills that kill the pipeline exactly between two writes.

``LAKEHOUSE_FAULT=<point>`` makes the process group die by SIGKILL when it reaches that
point, as ``kill -9`` of the job (Python and its Spark JVM) would: no cleanup, no
``finally``. Unset (always, outside the drills), a point costs one dictionary lookup.
Points are named ``<layer>:<step>`` or ``<layer>:<step>:<table>``; the ones a run passes
are listed in docs/reliability.md.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "LAKEHOUSE_FAULT"


def crash_point(name: str) -> None:
    """Die here if ``LAKEHOUSE_FAULT`` names this point (drills only)."""
    # Read at each point rather than once: a drill sets it per process.
    if os.environ.get(FAULT_ENV) == name:
        os.killpg(os.getpgrp(), signal.SIGKILL)
