"""Atomic output: write to a temporary file beside the target, then rename over it.

A crash or Ctrl-C leaves either the old file or the complete new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's directory; rename it to ``path`` on success.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> with atomic_path(os.path.join(d, "out.txt")) as tmp:
    ...     _ = tmp.write_text("done")
    >>> open(os.path.join(d, "out.txt")).read()
    'done'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kw) -> Iterator:
    """Open a temporary file for writing; it replaces ``path`` when the block succeeds."""
    with atomic_path(path) as tmp, open(tmp, mode, **kw) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())
