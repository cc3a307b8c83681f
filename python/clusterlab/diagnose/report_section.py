"""The diagnosis as the last section of a run's ``report.md`` (and ``report.html``): what
``clusterlab report`` and ``experiment run/report`` end with."""

from __future__ import annotations

from pathlib import Path

from clusterlab._atomic import atomic_open
from clusterlab.diagnose.render import job_lines

HEADING = "## Diagnosis"


def section(result: dict) -> str:
    out = [HEADING, "", "Where the time went and what removes the loss (`clusterlab diagnose`, docs/diagnose.md).", ""]
    for d in result["jobs"]:
        out += ["```text", *job_lines(d), "```", ""]
    return "\n".join(out)


def append_diagnosis(report_dir, result: dict) -> bool:
    """Replace or add the diagnosis section of ``report_dir/report.md`` (and its HTML when the
    study report wrote one); False when there is no report.md."""
    d = Path(report_dir)
    md_path = d / "report.md"
    if not md_path.exists():
        return False
    md = md_path.read_text().split("\n" + HEADING + "\n")[0].rstrip() + "\n\n" + section(result)
    with atomic_open(md_path) as f:
        f.write(md)
    if (d / "report.html").exists():
        from clusterlab.report.study import _html

        title = md.splitlines()[0].lstrip("# ").strip() if md else d.name
        with atomic_open(d / "report.html") as f:
            f.write(_html(md, title))
    return True


def first_lines(result: dict) -> list[str]:
    """The fidelity line and what is named first, per job (a command's closing lines)."""
    out = []
    for d in result["jobs"]:
        lines = job_lines(d)
        named = [x for x in lines if x.startswith(("named first:", "dominant loss in the job:"))][:1]
        fid = lines[0].split(" - ")[0].split(" (")[0]  # PASS / FAIL / not emulated; the details are in the report
        out.append(f"{d['job']}: {fid}" + (f"; {named[0]}" if named else ""))
    return out
