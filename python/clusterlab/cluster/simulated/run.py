"""Running the simulation engine (``engine.py``) as a separate process and reading its answer.

SimGrid's Python module comes from Debian's ``python3-simgrid`` (3.32), built for Debian's
``/usr/bin/python3``, not for the project's venv: the engine runs there as a child process,
reads a JSON job and writes a JSON result (nothing pickled), and clusterlab never imports
``simgrid`` itself. ``CLUSTERLAB_SIMGRID_PYTHON`` names another Python that has the module;
``CLUSTERLAB_SIM_KEEP_FAILED=DIR`` keeps a failed run's job directory in DIR.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tempfile

from clusterlab.errors import ClusterlabError, ConfigError

ENGINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "engine.py")
PINNED = "3.32"  # engine.py's own PINNED: Debian bookworm's python3-simgrid
ENV = "CLUSTERLAB_SIMGRID_PYTHON"
DEFAULT_PYTHON = "/usr/bin/python3"


class EngineMissing(ConfigError):
    """No Python with SimGrid's module (``make system-deps`` as root installs it)."""


class EngineFailed(ClusterlabError):
    """The engine process failed or ran out of time."""


@functools.cache
def _probe(python: str) -> tuple[str | None, str]:
    """(SimGrid's version, '') when ``python`` imports ``simgrid``; (None, why not) otherwise."""
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        return None, f"no Python at {python}"
    try:
        p = subprocess.run([python, "-c", "import simgrid; print(simgrid.simgrid_version)"], capture_output=True,
                           text=True, timeout=60, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    except subprocess.TimeoutExpired:
        return None, f"{python} took over 60 s to import simgrid"
    if p.returncode != 0:
        return None, f"{python} has no simgrid module"
    version = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "?"
    if ".".join(version.split(".")[:2]) != PINNED:
        return None, f"{python} has SimGrid {version}; the engine is written for {PINNED}"
    return version, ""


def engine_python() -> tuple[str, str]:
    """(the Python that runs the engine, SimGrid's version); ``EngineMissing`` naming why not."""
    python = os.environ.get(ENV) or DEFAULT_PYTHON
    version, why = _probe(python)
    if version is None:
        raise EngineMissing(f"the simulated cluster needs SimGrid {PINNED}'s Python module: {why} "
                            f"(as root: `make system-deps` installs Debian's python3-simgrid; {ENV} names "
                            "another Python that has it)")
    return python, version


def why_no_engine() -> str | None:
    """Why the engine cannot run here, or None (tests skip with this reason)."""
    try:
        engine_python()
    except EngineMissing as e:
        return str(e)
    return None


def run_engine(platform_xml: str, hosts: list[str], work: dict, config: dict, timeout: float = 600.0) -> dict:
    """Run ``work`` (``engine.py``'s job kinds) on ``hosts`` of the platform, the engine's
    ``--cfg`` settings ``config``; returns the engine's JSON result."""
    python, _ = engine_python()
    with tempfile.TemporaryDirectory(prefix="clusterlab-sim-") as d:
        plat, job, out = (os.path.join(d, n) for n in ("platform.xml", "job.json", "out.json"))
        with open(plat, "w") as f:
            f.write(platform_xml)
        with open(job, "w") as f:
            json.dump({"platform_file": plat, "hosts": hosts, "config": config, "work": work}, f)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's packages are not for it
        try:
            p = subprocess.run([python, ENGINE, job, out], capture_output=True, text=True, timeout=timeout, env=env,
                               cwd=d)
        except subprocess.TimeoutExpired:
            raise EngineFailed(f"the simulation did not finish in {timeout:g} s") from None
        if (p.returncode != 0 or not os.path.exists(out)) and os.environ.get("CLUSTERLAB_SIM_KEEP_FAILED"):
            import shutil

            shutil.copytree(d, os.environ["CLUSTERLAB_SIM_KEEP_FAILED"], dirs_exist_ok=True)
        if p.returncode != 0 or not os.path.exists(out):
            tail = " | ".join(line for line in p.stderr.strip().splitlines()[-3:] if "xbt_cfg/INFO" not in line)
            raise EngineFailed(f"the simulation engine failed (exit {p.returncode}): {tail or 'no message'}")
        with open(out) as f:
            return json.load(f)
