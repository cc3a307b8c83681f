"""The ATM switch's own counts per output port, as its cell model kept them: cells that came in,
cells sent, cells lost to a full buffer, cells the discard policy threw away, frames delivered,
frames lost at reassembly and the cells of lost frames that used the link ("wasted"), and the
cells and frames of them lost on a lossy link (``StarTopo.loss``), not in the buffer.

The switch (``clusterlab-atm``, started by a testbed with ``switch="atm"``) appends to
``/run/clusterlab/testbed/<testbed>.atm.trace``: one header line ``S <unix seconds> <settings
JSON>`` (``ports``: the port names in order), then every interval, per port that saw a cell,
``P <unix seconds> <port> <cells in> <cells out> <dropped> <discarded> <frames delivered>
<frames lost> <cells wasted> <max queue cells> <cells line lost> <frames line lost>`` (the
interval's counts; the maximum queue since the start; frames line lost are among frames lost). An interval without a line had no cells.

>>> import io
>>> text = ('S 100.0 {"interval_ns": 100000000, "ports": ["p0", "p1", "pc"]}\\n'
...         'P 100.1 0 500 400 100 0 1 2 150 250 0 0\\n'
...         'P 100.2 1 10 10 0 0 1 0 0 3 1 1\\n')
>>> tr = AtmTrace.parse(io.StringIO(text))
>>> [(r["t"], r["port"], r["cells_dropped"], r["frames_lost"], r["cells_wasted"]) for r in tr.records]
[(100.1, 'p0', 100, 2, 150), (100.2, 'p1', 0, 0, 0)]
>>> tr.totals()["p0"]["cells_wasted"]
150
"""

from __future__ import annotations

import json
import os

FIELDS = ("cells_in", "cells_out", "cells_dropped", "cells_discarded", "frames_delivered", "frames_lost",
          "cells_wasted", "max_queue_cells", "cells_line_lost", "frames_line_lost")
METRICS = tuple(f"atm_{f}" for f in FIELDS if f != "max_queue_cells")
"""The monitor's metric names (per interval, node ``switch``, interface = port)."""


class AtmTrace:
    """A parsed trace: ``start`` (unix seconds), ``settings`` and ``records`` (dicts with ``t``,
    ``port`` and the counts of ``FIELDS``)."""

    def __init__(self, start: float, settings: dict, records: list[dict]):
        self.start, self.settings, self.records = start, settings, records

    @classmethod
    def parse(cls, f) -> AtmTrace:
        start, settings, records = 0.0, {}, []
        ports: list[str] = []
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "S":
                start = float(parts[1])
                settings = json.loads(line.split(None, 2)[2])
                ports = list(settings.get("ports", []))
            elif parts[0] == "P" and len(parts) == 3 + len(FIELDS):
                i = int(parts[2])
                rec = {"t": float(parts[1]), "port": ports[i] if i < len(ports) else f"port{i}"}
                rec.update(zip(FIELDS, map(int, parts[3:]), strict=True))
                records.append(rec)
        return cls(start, settings, records)

    @classmethod
    def read(cls, path: str | os.PathLike) -> AtmTrace | None:
        """The trace at ``path``, or None when there is none (no ATM switch)."""
        try:
            with open(path) as f:
                return cls.parse(f)
        except FileNotFoundError:
            return None

    def totals(self, since: float = 0.0, until: float = float("inf")) -> dict[str, dict[str, int]]:
        """Per port, the counts summed over records in ``[since, until]`` (the max queue: its maximum)."""
        out: dict[str, dict[str, int]] = {}
        for r in self.records:
            if since <= r["t"] <= until:
                d = out.setdefault(r["port"], dict.fromkeys(FIELDS, 0))
                for k in FIELDS:
                    d[k] = max(d[k], r[k]) if k == "max_queue_cells" else d[k] + r[k]
        return out
