"""IS (integer sort): NPB's bucket sort with a key redistribution by all-to-all-v.

Per iteration, as NPB's MPI code: count and group the local keys by bucket; allreduce the
bucket sizes (with the five test keys hidden in five extra slots); assign runs of buckets to
ranks so each gets about ``total / size`` keys; exchange the send counts (all-to-all) and the
keys (all-to-all-v); rank the received keys by counting. Partial verification checks the
ranks of NPB's five test keys every iteration; the full verification (untimed) sorts the keys
and checks order, also across rank boundaries.

Keys are split among ranks by contiguous ranges of NPB's global key sequence (any number of
ranks; for powers of two exactly NPB's split), so the sorted keys never depend on the split.
"""

from __future__ import annotations

import numpy as np

from clusterlab import _core
from clusterlab.comm.errors import ProtocolError
from clusterlab.errors import ConfigError
from clusterlab.npb.common import Outcome, TracedComm, begin_timed, end_timed

NAME = "IS"
OPTYPE = "keys ranked"
ITERATIONS = 10
# (log2 total keys, log2 max key, log2 buckets), NPB's test key indices and their ranks
PARAMS = {"S": (16, 11, 9), "W": (20, 16, 10), "A": (23, 19, 10)}
TEST_INDEX = {"S": (48427, 17148, 23627, 62548, 4431),
              "W": (357773, 934767, 875723, 898999, 404505),
              "A": (2112377, 662041, 5336171, 3642833, 4250760)}
TEST_RANK = {"S": (0, 18, 346, 64917, 65463),
             "W": (1249, 11698, 1039987, 1043896, 1048018),
             "A": (104, 17523, 123928, 8288932, 8388264)}
MAX_PROCS = {"S": 128, "W": 1024, "A": 1024}  # NPB's limits


def describe(cls: str) -> tuple[str, int]:
    return str(2 ** PARAMS[cls][0]), ITERATIONS


def check(cls: str, n: int) -> None:
    if n > MAX_PROCS[cls]:
        raise ConfigError(f"IS class {cls} runs on at most {MAX_PROCS[cls]} ranks (NPB's limit), not {n}")


def mops(cls: str, seconds: float) -> float:
    return ITERATIONS * 2.0 ** PARAMS[cls][0] / seconds / 1e6


def expected_rank(cls: str, i: int, iteration: int) -> int:
    """NPB's expected rank of test key ``i`` after ``iteration``."""
    r = TEST_RANK[cls][i]
    if cls == "S":
        return r + iteration if i <= 2 else r - iteration
    if cls == "W":
        return r + (iteration - 2) if i < 2 else r - iteration
    return r + (iteration - 1) if i <= 2 else r - (iteration - 1)


class _Sorter:
    def __init__(self, comm: TracedComm, cls: str):
        self.comm, self.cls = comm, cls
        total_log2, max_log2, nb_log2 = PARAMS[cls]
        self.total, self.max_key, self.nb = 1 << total_log2, 1 << max_log2, 1 << nb_log2
        self.shift = max_log2 - nb_log2
        n, r = comm.size, comm.rank
        self.lo, self.hi = r * self.total // n, (r + 1) * self.total // n
        self.keys = _core.npb_is_keys(self.lo, self.hi - self.lo, self.max_key)
        self.grouped = np.empty_like(self.keys)  # NPB's static key_buff1
        self.passed = 0
        self.found = np.zeros(5, dtype=np.int64)  # ranks of the test keys, last iteration

    def _set(self, index: int, value: int) -> None:
        if self.lo <= index < self.hi:
            self.keys[index - self.lo] = value

    def rank(self, iteration: int):
        """One NPB ``rank()``: returns (received keys, their counts, min key, lesser keys)."""
        comm, n, me = self.comm, self.comm.size, self.comm.rank
        self._set(iteration, iteration)
        self._set(iteration + ITERATIONS, self.max_key - iteration)
        hidden = np.zeros(5, dtype=np.int64)
        for i, idx in enumerate(TEST_INDEX[self.cls]):
            if self.lo <= idx < self.hi:
                hidden[i] = self.keys[idx - self.lo]
        sizes = _core.npb_is_bucket_sort(self.keys, self.shift, self.nb, self.grouped)
        totals = comm.allreduce(np.concatenate([sizes, hidden]), "sum")
        # runs of buckets per rank: rank j's last bucket is the first (after rank j-1's) where
        # the running total reaches (j + 1) * total / n (NPB's rule)
        acc = np.cumsum(totals[:self.nb])
        first, last = np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        prev = -1
        for j in range(n):
            b = max(int(np.searchsorted(acc * n, (j + 1) * self.total, side="left")), prev + 1)
            if b >= self.nb:
                break
            first[j], last[j], prev = prev + 1, b, b
        local = np.concatenate([[0], np.cumsum(sizes)])
        send = np.where(last >= first, local[np.minimum(last + 1, self.nb)] - local[np.minimum(first, self.nb)], 0)
        if n == 1:
            keys = self.grouped
        else:
            recv_counts = np.array([int(c[0]) for c in comm.alltoall([send[j:j + 1] for j in range(n)])])
            keys, got = comm.alltoallv(self.grouped, send)
            if not np.array_equal(got, recv_counts):
                raise ProtocolError(f"IS: key counts {got.tolist()} differ from the announced {recv_counts.tolist()}")
        min_key, max_key = int(first[me]) << self.shift, ((int(last[me]) + 1) << self.shift) - 1
        counts = _core.npb_is_rank_counts(keys, min_key, max_key)
        lesser = int(totals[:first[me]].sum()) if last[me] >= first[me] else 0
        for i in range(5):
            k = int(totals[self.nb + i])
            if min_key <= k <= max_key:
                below = int(counts[k - 1 - min_key]) if k - 1 >= min_key else 0
                self.found[i] = below + lesser
                if below + lesser == expected_rank(self.cls, i, iteration):
                    self.passed += 1
        return keys, counts, min_key

    def full_verify(self, keys, counts, min_key) -> None:
        """NPB's full_verify: sort by rank, check order here and against the previous rank."""
        comm = self.comm
        ordered, bad = _core.npb_is_full_sort(keys, counts, min_key) if len(keys) else (keys, 0)
        last = np.array([ordered[-1] if len(ordered) else -1], dtype=np.int32)
        if comm.rank < comm.size - 1:
            comm.send(comm.rank + 1, last, tag=1000)
        if comm.rank > 0:
            prev = int(comm.recv(comm.rank - 1, tag=1000)[0])
            if len(ordered) and prev > int(ordered[0]):
                bad += 1
        if bad == 0:
            self.passed += 1


def run(comm: TracedComm, cls: str) -> Outcome:
    s = _Sorter(comm, cls)
    s.rank(1)  # NPB's untimed first iteration
    s.passed = 0
    t0 = begin_timed(comm)
    for it in range(1, ITERATIONS + 1):
        keys, counts, min_key = s.rank(it)
    seconds = end_timed(comm, t0)
    s.full_verify(keys, counts, min_key)
    passed = int(comm.allreduce(np.array([s.passed], dtype=np.int64), "sum")[0])
    found = comm.allreduce(s.found, "sum").tolist()
    want = 5 * ITERATIONS + comm.size
    values = {"passed_checks": passed, "expected_checks": want, "test_key_ranks": found}
    return Outcome(seconds, passed == want, values)
