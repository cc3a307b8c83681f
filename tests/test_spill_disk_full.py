"""Spilling itemsets on a full disk: refused with the room it needs, or told as a full disk,
never lost silently (``ndarray.tofile`` loses a small write's failure at close)."""

import errno
import os

import numpy as np
import pytest

from clusterlab.mining import stream


def test_a_write_to_a_full_device_is_an_enospc_not_silence():
    with pytest.raises(OSError) as e:
        stream.write_array(np.arange(10, dtype=np.uint32), "/dev/full", "/dev")
    assert e.value.errno == errno.ENOSPC
    with open("/dev/full", "ab") as f, pytest.raises(OSError) as e:
        stream.write_array(np.zeros(1 << 16, np.uint64), f, "/dev")
        f.flush()
    assert e.value.errno == errno.ENOSPC


def test_a_spill_larger_than_the_free_space_is_refused_before_writing(tmp_path, monkeypatch):
    class Full:
        f_bavail, f_frsize = 1, 4096
    runs = stream.SortedRuns(str(tmp_path))
    monkeypatch.setattr(stream.os, "statvfs", lambda p: Full())
    with pytest.raises(OSError, match=r"no room to spill 8,000 bytes \(4,096 free") as e:
        runs.add(np.arange(0, 2001, 2, dtype=np.int64), np.arange(2000, dtype=np.uint32), np.ones(1000, np.uint64))
    assert e.value.errno == errno.ENOSPC and e.value.filename == runs.dir
    assert os.listdir(runs.dir) == []


def test_spilled_runs_read_back_as_written(tmp_path):
    runs = stream.SortedRuns(str(tmp_path))
    runs.add(np.array([0, 1, 2, 4]), np.array([3, 5, 1, 2], np.uint32), np.array([7, 6, 5], np.uint64))
    assert runs.runs == [{1: 2, 2: 1}] and runs.bytes == 4 * 4 + 3 * 8
