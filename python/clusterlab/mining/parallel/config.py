"""Settings of a parallel mining run (no I/O, no communication).

>>> ParallelConfig(partition="itemset").check()
>>> ParallelConfig(block_bytes=4).check()
Traceback (most recent call last):
...
clusterlab.errors.ConfigError: block_bytes must be at least 16, got 4
"""

from __future__ import annotations

import dataclasses
import math

from clusterlab.errors import ConfigError

PARTITIONS = ("prefix", "itemset")
COUNTINGS = ("tidlist", "trie")
PFP_KERNELS = ("vertical", "fptree", "fpgrowth")


@dataclasses.dataclass
class ParallelConfig:
    """Settings of a parallel run (defaults follow seed 000: 8 KB message blocks, 64 KB reads).

    ``block_bytes``: size of a message block of routed k-itemsets. ``read_block_bytes``: the
    scan proceeds over the in-memory partition in read blocks of about this many item bytes;
    after each one the blocks that filled up are sent. ``prune``: full Apriori prune at the
    sender (less traffic). ``eld_max``: HPA-ELD replicates at most this many candidates per
    pass (those made only of the most frequent items). ``max_len``: longest itemset (0: none).
    ``partition``: how HPA spreads candidates over ranks: ``"prefix"`` (default; a candidate
    belongs to the owner of its first item, first items are dealt out by estimated work, and a
    transaction travels once per owner as one record) or ``"itemset"`` (seed 000's hash of the
    whole itemset; every subset travels on its own). HPA-ELD always uses ``"itemset"``.
    ``local_pairs``: pass 2 (HPA and CD) counts every pair of frequent items on each rank in a
    triangle and all-reduces the counts, instead of shipping pairs item by item (used when the
    triangle has at most ``DENSE_PAIRS_MAX`` entries); ``False`` with ``partition="itemset"``
    is seed 000's HPA exactly. ``counting``: how CD counts passes 3 and up on each rank:
    ``"tidlist"`` (intersect the tid-lists of the two generating itemsets, Eclat's step) or
    ``"trie"`` (walk each transaction's subsets through the candidates, Agrawal & Shafer's).
    ``pfp_kernel``: how a PFP rank mines its group: ``"vertical"`` (tid-list intersections
    guided by the group's pair counts: Eclat, the fastest kernel here), ``"fptree"`` (a
    group-restricted FP-growth) or ``"fpgrowth"`` (the sequential FP-growth on each item's
    conditional base). ``rescan``: HPA reads the rank's share again from its source at the start
of every pass after the first, as seed 000/001's HPA rescans its database each pass (from a
LUN: through the initiator each time); default: read once and kept in memory. ``timeout``: seconds any wait may take. ``progress``: rank 0 writes one line per finished
    pass to stderr.
    """

    block_bytes: int = 8192
    read_block_bytes: int = 65536
    prune: bool = True
    eld_max: int = 20000
    max_len: int = 0
    timeout: float = 120.0
    partition: str = "prefix"
    local_pairs: bool = True
    counting: str = "tidlist"
    pfp_kernel: str = "vertical"
    progress: bool = False
    rescan: bool = False

    def check(self) -> None:
        """Raise ``ConfigError`` naming the first impossible setting."""
        if self.partition not in PARTITIONS:
            raise ConfigError(f"partition must be 'prefix' or 'itemset', got {self.partition!r}")
        if self.counting not in COUNTINGS:
            raise ConfigError(f"counting must be 'tidlist' or 'trie', got {self.counting!r}")
        if self.pfp_kernel not in PFP_KERNELS:
            raise ConfigError(f"pfp_kernel must be one of {', '.join(PFP_KERNELS)}, got {self.pfp_kernel!r}")
        if not isinstance(self.rescan, bool):
            raise ConfigError(f"rescan must be true or false, got {self.rescan!r}")
        for name in ("block_bytes", "read_block_bytes", "eld_max", "max_len"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ConfigError(f"{name} must be an integer, got {v!r}")
        if self.block_bytes < 16:
            raise ConfigError(f"block_bytes must be at least 16, got {self.block_bytes}")
        if self.read_block_bytes < 64:
            raise ConfigError(f"read_block_bytes must be at least 64, got {self.read_block_bytes}")
        if self.eld_max < 0 or self.max_len < 0:
            raise ConfigError("eld_max and max_len must be non-negative")
        if not (isinstance(self.timeout, (int, float)) and math.isfinite(self.timeout) and self.timeout > 0):
            raise ConfigError(f"timeout must be a positive number of seconds, got {self.timeout}")

    def as_dict(self) -> dict:
        """JSON-able form (how the settings travel to launched ranks)."""
        return dataclasses.asdict(self)
