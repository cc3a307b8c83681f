"""A frame mover (the WAN delay line, the ATM cell switch): a Rust loop run as a process of
its own inside one of the testbed's namespaces, started and stopped with the testbed.

``start`` runs ``python -m MODULE JSON`` inside the namespace; the process opens its packet
sockets, says ``ready`` and moves frames until its stdin reaches end of file. The driver holds
the other end of that pipe, so the mover dies with the driver, also on SIGKILL; a testbed kept
after its driver (``clusterlab testbed up``) has a mover without a pipe, and ``testbed
down|clean NAME`` kills it with every other process of the testbed's namespaces. Its last line
of output is its totals (JSON).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

from clusterlab.cluster.testbed.node import TestbedError

STATE_DIR = "/run/clusterlab/testbed"


class Mover:
    """A running mover (its process and, unless kept, the lifeline pipe)."""

    def __init__(self, proc: subprocess.Popen, trace: str, settings: dict):
        self.proc, self.trace, self.settings = proc, trace, settings

    def stop(self, timeout: float = 5.0) -> dict | None:
        """Close the lifeline and collect the totals (None if it was killed)."""
        if self.proc.stdin is None:  # a kept mover has no lifeline and no reader: end it
            self.proc.kill()
            self.proc.wait(timeout)
            return None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            return None
        out = self.proc.stdout.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        for line in reversed((out or "").splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        return None


def start(module: str, ns: str, payload: dict, keep: bool, what: str, timeout: float = 15.0) -> subprocess.Popen:
    """Start ``python -m module json(payload + watch)`` in ``ns``; returns once it said ready.
    ``what`` names it in the error when it does not start."""
    env = dict(os.environ)
    pkg_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    args = ["ip", "netns", "exec", ns, sys.executable, "-m", module, json.dumps({**payload, "watch": not keep})]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL if keep else subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=keep)  # a kept mover must not get the terminal's Ctrl-C
    first = ""
    r, _, _ = select.select([proc.stdout], [], [], timeout)
    if r:
        first = proc.stdout.readline()
    if first.strip() != "ready":
        proc.kill()
        _, err = proc.communicate()
        why = (err or "").strip().splitlines()[-1:] or [f"no answer in {timeout} s"]
        raise TestbedError(f"{what} did not start: {why[0]}")
    if keep:  # nobody reads it later: let it go (its output is only the final totals)
        proc.stdout.close()
        proc.stderr.close()
    return proc
