"""What every layer of ``clusterlab.comm`` shares about messages: the payload type, its size,
and the tag ranges (those are the wire format's, ``clusterlab.rendezvous.frames``). The
interface (``communicator.py``) and the collective algorithms (``collectives/``) both import
it without importing one another.

>>> import numpy as np
>>> nbytes(np.zeros(3)), nbytes(b"ab"), COLLECTIVE_TAG, MAX_USER_TAG == 2**30
(24, 2, -1, True)
"""

from __future__ import annotations

import numpy as np

from clusterlab.rendezvous.frames import COLLECTIVE_TAG, MAX_USER_TAG

Payload = bytes | bytearray | memoryview | np.ndarray


def nbytes(data: Payload) -> int:
    """Size of a payload in bytes."""
    if isinstance(data, np.ndarray):
        return data.nbytes
    return memoryview(data).nbytes


__all__ = ["COLLECTIVE_TAG", "MAX_USER_TAG", "Payload", "nbytes"]
