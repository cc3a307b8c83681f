"""Opening basket input that is not a plain file: pipes, FIFOs, ``/dev/stdin``, process
substitution (``<(zcat x.dat.gz)``), devices and /proc files.

A regular file with a size is read by path (memory-mapped, byte ranges possible). Anything
else is opened here and read as a stream from its descriptor. Opening a named FIFO blocks
until a writer opens it, so that happens in a helper thread: after a second the user is told
on stderr that we are waiting, and after ``CLUSTERLAB_FIFO_TIMEOUT`` seconds (default 60)
the read fails with a one-line error instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import threading
from collections.abc import Iterator

from clusterlab.errors import BasketFormatError, ConfigError

FIFO_TIMEOUT_ENV = "CLUSTERLAB_FIFO_TIMEOUT"
FIFO_TIMEOUT_DEFAULT = 60.0
NOTICE_AFTER = 1.0


def fifo_timeout() -> float:
    text = os.environ.get(FIFO_TIMEOUT_ENV)
    if text is None:
        return FIFO_TIMEOUT_DEFAULT
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(f"{FIFO_TIMEOUT_ENV}={text!r}: give a positive number of seconds")
    return value


def input_stat(path) -> os.stat_result:
    """``os.stat`` of an input, as a one-line error when it cannot be read at all."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BasketFormatError(path, 0, 0, "no such file") from None
    except OSError as e:
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise BasketFormatError(path, 0, 0, "is a directory, not a basket file")
    return st


def is_seekable_file(st: os.stat_result) -> bool:
    """A regular file whose size is known (files under /proc report 0: stream those)."""
    return stat.S_ISREG(st.st_mode) and st.st_size > 0


def _open_fifo(path, timeout: float) -> int:
    result: dict = {}

    def opener() -> None:
        try:
            result["fd"] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            result["error"] = e

    t = threading.Thread(target=opener, name="clusterlab-fifo-open", daemon=True)
    t.start()
    try:
        t.join(min(NOTICE_AFTER, timeout))
        if t.is_alive():
            print(f"clusterlab: waiting for a writer to open FIFO {path} (up to {timeout:g} s; "
                  f"{FIFO_TIMEOUT_ENV} sets the limit)", file=sys.stderr, flush=True)
            t.join(max(0.0, timeout - NOTICE_AFTER))
    finally:
        if t.is_alive():
            # Our own writer end releases the blocked open (it succeeds: we are a reader).
            with contextlib.suppress(OSError):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            t.join(5)
            if "fd" in result:
                os.close(result.pop("fd"))
    if "error" in result:
        e = result["error"]
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}")
    if "fd" not in result:
        raise BasketFormatError(path, 0, 0, f"no writer opened this FIFO within {timeout:g} s "
                                            f"(set {FIFO_TIMEOUT_ENV}=SECONDS to wait longer)")
    return result["fd"]


@contextlib.contextmanager
def open_stream(path, st: os.stat_result) -> Iterator[int]:
    """A read descriptor for a non-seekable input (closed on exit)."""
    if stat.S_ISFIFO(st.st_mode):
        fd = _open_fifo(path, fifo_timeout())
    else:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as e:
            raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    try:
        if os.isatty(fd):
            print("clusterlab: reading baskets from the terminal; end with Ctrl-D", file=sys.stderr, flush=True)
        yield fd
    finally:
        os.close(fd)


def read_all(path, fd: int) -> bytes:
    """Every byte of a stream (for formats that need the whole input: CSV, Parquet)."""
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError as e:
        raise BasketFormatError(path, 0, 0, f"cannot read: {e.strerror or e}") from None
    return b"".join(chunks)
