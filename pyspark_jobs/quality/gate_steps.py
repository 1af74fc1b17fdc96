"""Which of a run summary's timed steps are the gates' work (for the report's sums and
charts, and the bench's per-layer figures)."""

from __future__ import annotations

# The Data Docs of a run's validated gates, rendered once after the last gate
# (``gates.render_run_docs``), not by each gate.
DOCS_STEP = "data docs"


def is_gate_step(step: str) -> bool:
    """Whether ``step`` (a key of a run summary's ``timings``) is a gate's or the run's
    Data Docs."""
    return step.endswith(" gate") or step == DOCS_STEP
