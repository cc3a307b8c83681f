"""Where a run's time went, what removes the loss and what it would gain (``clusterlab diagnose``).

``diagnose_dir(run_dir)``: read the run directory (``run.load``: nothing is rerun), apply the
rules (``rules.diagnose``: pure functions of the parsed run) and the fidelity check of an
emulated run (``fidelity.check``); ``render_text`` prints it. The report layer: it reads what
every layer below records and nothing below imports it.
"""

from __future__ import annotations

from clusterlab.diagnose.render import render_text
from clusterlab.diagnose.rules import diagnose
from clusterlab.diagnose.run import Job, load

__all__ = ["Job", "diagnose", "diagnose_dir", "diagnose_summary", "load", "point_fidelity", "render_text"]


def diagnose_dir(run_dir) -> dict:
    """``{"run_dir", "jobs": [diagnosis, ...]}`` for every job the directory records."""
    return {"run_dir": str(run_dir), "jobs": [diagnose(j) for j in load(run_dir)]}


def diagnose_summary(summary: dict, label: str = "this run") -> dict:
    """The same for a ``clusterlab mine --nodes N`` summary held in memory (the command's own
    closing diagnosis)."""
    from clusterlab.diagnose.run import mining_job

    return {"run_dir": None, "jobs": [diagnose(mining_job(summary, label))]}


def point_fidelity(run_dir, point) -> dict:
    """The fidelity verdict (``fidelity.check``) of one point of a study run."""
    from clusterlab.diagnose.fidelity import check
    from clusterlab.diagnose.run import study_point_job

    return check(study_point_job(run_dir, point))
