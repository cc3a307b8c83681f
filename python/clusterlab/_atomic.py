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


def check_writable(path: str | os.PathLike, what: str = "output", *, need_bytes: int = 0) -> None:
    """Raise ``ConfigError`` (one line) unless the file ``path`` can be written: its directory
    (or the nearest existing ancestor, which ``atomic_path`` would create it under) is a writable
    directory with room for it. Called before long work, so a run does not end with its result
    lost; a probe file is created and removed again.

    >>> import tempfile
    >>> check_writable(os.path.join(tempfile.mkdtemp(), "new", "out.parquet"))
    >>> check_writable("/proc/version/out.txt")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: output /proc/version/out.txt: /proc/version is not a directory
    >>> check_writable("/dev/null")
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: output /dev/null: exists and is not a regular file (it would be replaced)
    """
    check_output(path, what, need_bytes=need_bytes)


def check_output(path: str | os.PathLike, what: str = "output", *, directory: bool = False,
                 need_bytes: int = 0) -> None:
    """The one check of every output path, before the work starts: a file (``directory``
    False) or a directory that will be created or written into; ``need_bytes``: the free space
    the output needs, when it is known.

    >>> check_output("/proc/x/run", "-o", directory=True)
    Traceback (most recent call last):
    ...
    clusterlab.errors.ConfigError: -o /proc/x/run: cannot write in /proc: No such file or directory
    """
    from clusterlab.errors import ConfigError

    target = Path(path)
    if str(path) == "":
        raise ConfigError(f"{what}: an empty path")
    if directory:
        if target.exists() and not target.is_dir():
            raise ConfigError(f"{what} {path}: exists and is not a directory")
        parent = target
    else:
        if target.is_dir():
            raise ConfigError(f"{what} {path}: is a directory")
        if target.exists() and not target.is_file():
            raise ConfigError(f"{what} {path}: exists and is not a regular file (it would be replaced)")
        parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{what} {path}: {parent} is not a directory")
    probe = parent / f".{target.name or 'out'}.probe-{os.getpid()}"
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
    if need_bytes:
        st = os.statvfs(parent)
        free = st.f_bavail * st.f_frsize
        if free < need_bytes:
            raise ConfigError(f"{what} {path}: needs about {need_bytes} bytes, {parent} has {free} free")
