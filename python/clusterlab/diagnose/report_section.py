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


def one_line(d: dict) -> str:
    """A job's diagnosis in one line: what is named first (the dominant loss, or the launch when
    it costs many times the job), its fix and the predicted gain."""
    from clusterlab.diagnose.render import _fmt, none_found

    total = max(d["seconds"], 1e-9)
    if d.get("launch_first"):
        la = d["launch"]
        return (f"named first: {la['title']}, {_fmt(la['seconds'])} outside the job; fix: {la['fix']}; "
                f"predicted gain: {_fmt(la['predicted_gain_s'])} ({la['method']})")
    dom = d["dominant"]
    if dom is None:
        return f"dominant loss: {none_found(d)}"
    out = f"dominant loss: {dom['title']}, {_fmt(dom['seconds'])} ({dom['seconds'] / total:.0%} of the job)"
    out += f"; fix: {dom['fix']}" if dom["fix"] else "; fix: none named"
    if dom["predicted_gain_s"] is not None:
        out += (f"; predicted gain: {_fmt(dom['predicted_gain_s'])} ({dom['predicted_gain_s'] / total:.0%} of the job; "
                f"{dom['method']})")
    elif dom["method"]:
        out += f"; predicted gain: {dom['method']}"
    return out


def closing_lines(result: dict) -> list[str]:
    """What a command that ran or reported a job ends with, per job: its fidelity line, its
    warnings, and ``diagnosis:`` with the dominant loss, the fix and the predicted gain (the
    whole split: ``clusterlab diagnose``). Jobs are named when there are several."""
    out = []
    many = len(result["jobs"]) > 1
    for d in result["jobs"]:
        who = f"{d['job']}: " if many else ""
        out.append(who + d["fidelity"]["line"])
        out += [f"{who}WARNING: {w}" for w in d["warnings"]]
        out.append(f"diagnosis: {who}{one_line(d)}")
    return out
