"""The WAN line's traffic, as its delay line counted it: packets and bytes per 64-byte IP length
bucket, per direction, every 0.1 s, of what the line carried (counted as each packet leaves),
and the packets it dropped (seed 004's traffic-pattern figures).

The line (``clusterlab-wan``, started by the testbed) appends to
``/run/clusterlab/testbed/<testbed>.wan.trace``: one header line
``S <unix seconds> <settings JSON>``, then per interval and direction that saw a frame
``T <unix seconds> <dir> <packets> <bytes> <drops> <bucket>:<packets>:<bytes> ...``
(``dir`` 0: site A to site B). An interval without a line had no traffic.

>>> import io
>>> text = ('S 100.0 {"interval_ns": 100000000, "rate_bps": 1e6}\\n'
...         'T 100.1 0 2 1540 0 0:1:40 23:1:1500\\n'
...         'T 100.3 1 1 40 1 0:1:40\\n')
>>> tr = WanTrace.parse(io.StringIO(text))
>>> s = tr.series(0, 100.0, 100.3)
>>> s["packets"].tolist(), s["bytes"].tolist(), int(s["bucket_packets"][0, 23])
([2, 0, 0], [1540, 0, 0], 1)
>>> tr.series(1, 100.0, 100.3)["drops"].tolist()
[0, 0, 1]
"""

from __future__ import annotations

import json
import os

import numpy as np

BUCKET = 64
BUCKETS = 65536 // BUCKET
STATE_DIR = "/run/clusterlab/testbed"


def trace_path(testbed: str) -> str:
    """Where testbed ``testbed``'s line writes its trace (the line takes the path from here)."""
    return os.path.join(STATE_DIR, f"{testbed}.wan.trace")


class WanTrace:
    """A parsed trace: ``start`` (unix seconds), ``settings`` (what the line emulated),
    ``interval`` (seconds) and the records."""

    def __init__(self, start: float, settings: dict, records: list[tuple]):
        self.start, self.settings, self.records = start, settings, records
        self.interval = settings.get("interval_ns", 100_000_000) / 1e9

    @classmethod
    def parse(cls, f) -> WanTrace:
        start, settings, records = 0.0, {}, []
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "S":
                start, settings = float(parts[1]), json.loads(line.split(None, 2)[2])
            elif parts[0] == "T" and len(parts) >= 6:
                buckets = [tuple(int(v) for v in p.split(":")) for p in parts[6:]]
                records.append((float(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]), int(parts[5]), buckets))
            else:
                raise ValueError(f"WAN trace line {n}: expected 'S ...' or 'T ...', got {line[:40]!r}")
        return cls(start, settings, records)

    @classmethod
    def read(cls, path: str) -> WanTrace:
        with open(path) as f:
            return cls.parse(f)

    @classmethod
    def of_testbed(cls, tb) -> WanTrace:
        """The trace of testbed ``tb``'s line (read it before the testbed goes down)."""
        return cls.read(trace_path(tb.name))

    def series(self, direction: int, t0: float | None = None, t1: float | None = None) -> dict:
        """Direction ``direction``'s intervals ending in (t0, t1] (unix seconds), zeros included:
        ``t`` (interval end, seconds after t0), ``packets``, ``bytes``, ``drops``, and
        ``bucket_packets``/``bucket_bytes`` (intervals x buckets, trimmed to the largest
        bucket seen in either direction)."""
        recs = [r for r in self.records if r[1] == direction]
        t0 = self.start if t0 is None else t0
        if t1 is None:
            t1 = max((r[0] for r in self.records), default=t0)
        n = max(0, int(round((t1 - t0) / self.interval)))
        top = 1 + max((b[0] for r in self.records for b in r[5]), default=0)
        out = {"t": (np.arange(n) + 1) * self.interval, "packets": np.zeros(n, np.int64),
               "bytes": np.zeros(n, np.int64), "drops": np.zeros(n, np.int64),
               "bucket_packets": np.zeros((n, top), np.int64), "bucket_bytes": np.zeros((n, top), np.int64)}
        for t, _, p, b, d, buckets in recs:
            k = int(np.ceil((t - t0) / self.interval - 1e-6)) - 1
            if not 0 <= k < n:
                continue
            out["packets"][k] += p
            out["bytes"][k] += b
            out["drops"][k] += d
            for bucket, bp, bb in buckets:
                out["bucket_packets"][k, bucket] += bp
                out["bucket_bytes"][k, bucket] += bb
        return out

    def totals(self, t0: float | None = None, t1: float | None = None) -> dict:
        """Packets, bytes and drops per direction in the window."""
        out = {}
        for d in (0, 1):
            recs = [r for r in self.records if r[1] == d and (t0 is None or r[0] > t0) and (t1 is None or r[0] <= t1)]
            out[d] = {"packets": sum(r[2] for r in recs), "bytes": sum(r[3] for r in recs),
                      "drops": sum(r[4] for r in recs)}
        return out


def exists_for(tb) -> bool:
    return os.path.exists(trace_path(tb.name))
