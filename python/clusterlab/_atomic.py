"""Atomic output: write to a temporary file beside the target, then rename over it.

A crash or Ctrl-C leaves either the old file or the complete new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import errno
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


def check_writable(path: str | os.PathLike, what: str = "output") -> None:
    """Raise ``ConfigError`` (one line) unless ``path`` can be written: its directory (or the
    nearest existing ancestor, which ``atomic_path`` would create it under) is a writable
    directory with room for a file. Called before long work, so a run does not end with its
    result lost; a probe file is created and removed again.

    >>> import tempfile
    >>> check_writable(os.path.join(tempfile.mkdtemp(), "new", "out.parquet"))
    >>> check_writable("/proc/version/out.txt")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: output /proc/version/out.txt: /proc/version is not a directory
    """
    from clusterlab.errors import ConfigError

    target = Path(path)
    if target.is_dir():
        raise ConfigError(f"{what} {path}: is a directory")
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {path}: {parent} is not a directory")
    probe = parent / f".{target.name}.probe-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            # Reserve real blocks: a full file system fails here rather than after the run.
            os.posix_fallocate(fd, 0, 65536)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
        finally:
            os.close(fd)
    except OSError as e:
        raise ConfigError(f"{what} {path}: cannot write in {parent}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()
