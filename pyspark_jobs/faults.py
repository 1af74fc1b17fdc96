"""Named crash points, for drills that stop the pipeline exactly between two writes.

``LAKEHOUSE_FAULT=<point>`` makes a run stop when it reaches that point. By default the
process group dies by SIGKILL, as ``kill -9`` of the job (Python and its Spark JVM)
would: no cleanup, no ``finally``. With ``LAKEHOUSE_FAULT_MODE=raise`` the point raises
``InjectedFault`` instead, so a test can stop a run in its own process (and its shared
Spark session) and resume it from there: the writes already committed are exactly those
a kill at that point leaves. Unset (always, outside the drills), a point costs one
dictionary lookup. Points are named ``<layer>:<step>`` or ``<layer>:<step>:<table>``;
the ones a run passes are listed in docs/reliability.md.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "LAKEHOUSE_FAULT"
FAULT_MODE_ENV = "LAKEHOUSE_FAULT_MODE"


class InjectedFault(RuntimeError):
    """A run stopped at a crash point (``LAKEHOUSE_FAULT_MODE=raise``)."""


def crash_point(name: str) -> None:
    """Stop here if ``LAKEHOUSE_FAULT`` names this point (drills only)."""
    # Read at each point rather than once: a drill sets it per process or per run.
    if os.environ.get(FAULT_ENV) != name:
        return
    if os.environ.get(FAULT_MODE_ENV) == "raise":
        raise InjectedFault(f"stopped at crash point {name}")
    os.killpg(os.getpgrp(), signal.SIGKILL)
