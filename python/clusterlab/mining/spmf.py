"""SPMF text output: one itemset per line, ``1 3 #SUP: 3``; rules as
``1 ==> 3 #SUP: 3 #CONF: 0.75`` (the format of the SPMF library and of many papers' tools).

>>> import os, tempfile, clusterlab
>>> t = clusterlab.mine([[1, 3], [1, 3], [3]], min_support=2)
>>> p = os.path.join(tempfile.mkdtemp(), "sets.txt")
>>> write_spmf_itemsets(t, p)
>>> print(open(p).read(), end="")
1 #SUP: 2
3 #SUP: 3
1 3 #SUP: 2
>>> read_spmf_itemsets(p, n_transactions=3).to_pydict()["count"]
[2, 3, 2]
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from clusterlab._atomic import atomic_open
from clusterlab.errors import BasketFormatError, ConfigError
from clusterlab.mining.result import itemset_table, list_column_csr


def _tokens(col) -> list[list[str]]:
    """Rows of a list column as lists of strings, refusing labels SPMF cannot hold."""
    offsets, values = list_column_csr(col)
    vals = [str(v) for v in values.to_pylist()]
    for v in vals:
        if not v or any(c.isspace() for c in v) or v.startswith("#") or v == "==>":
            raise ConfigError(f"item {v!r} cannot be written in SPMF format (blank, whitespace, '#' or '==>')")
    o = offsets.tolist()
    return [vals[o[k]:o[k + 1]] for k in range(len(o) - 1)]


def write_spmf_itemsets(table: pa.Table, path: str | os.PathLike) -> None:
    """Write an itemset table (``items``, ``count``) as SPMF text, atomically."""
    rows = _tokens(table.column("items"))
    counts = table.column("count").to_pylist()
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{' '.join(r)} #SUP: {c}\n" for r, c in zip(rows, counts, strict=True))


def write_spmf_rules(table: pa.Table, path: str | os.PathLike) -> None:
    """Write a rule table (``antecedent``, ``consequent``, ``count``, ``confidence``) as SPMF text."""
    ante = _tokens(table.column("antecedent"))
    cons = _tokens(table.column("consequent"))
    counts = table.column("count").to_pylist()
    conf = table.column("confidence").to_pylist()
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{' '.join(a)} ==> {' '.join(c)} #SUP: {n} #CONF: {x:.6g}\n"
                     for a, c, n, x in zip(ante, cons, counts, conf, strict=True))


def read_spmf_itemsets(path: str | os.PathLike, n_transactions: int | None = None) -> pa.Table:
    """Read SPMF itemsets back as an itemset table (integer items become uint32, others
    strings). Without ``n_transactions`` the support fractions are NaN."""
    rows, counts = [], []
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    with f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            head, sep, sup = line.partition("#SUP:")
            if not sep:
                raise BasketFormatError(path, ln, 1, "missing '#SUP:'")
            try:
                c = int(sup.split()[0])
            except (ValueError, IndexError):
                raise BasketFormatError(path, ln, len(head) + 6, f"support is not an integer: {sup.strip()!r}") from None
            items = head.split()
            if not items:
                raise BasketFormatError(path, ln, 1, "empty itemset")
            rows.append(items)
            counts.append(c)
    flat = [x for r in rows for x in r]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    labels = None
    if all(x.isdigit() for x in flat):
        items = np.asarray([int(x) for x in flat], dtype=np.uint64)
        if items.size and items.max() > 0xFFFFFFFF:
            raise BasketFormatError(path, 0, 0, "an item id exceeds 4294967295")
        items = items.astype(np.uint32)
    else:
        labels = sorted(set(flat))
        index = {s: k for k, s in enumerate(labels)}
        items = np.asarray([index[x] for x in flat], dtype=np.uint32)
    t = itemset_table(offsets, items, np.asarray(counts, dtype=np.uint64), n_transactions or 0, labels)
    if not n_transactions:
        t = t.set_column(2, "support", pa.array(np.full(t.num_rows, np.nan)))
    return t
