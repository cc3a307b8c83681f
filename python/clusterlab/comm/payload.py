"""What every layer of ``clusterlab.comm`` shares about messages: the payload type, its size,
and the tag ranges. It imports nothing of clusterlab, so the interface (``communicator.py``),
the wire format (``tcp/frames.py``) and the collective algorithms (``collectives/``) can all
import it without importing one another.

>>> import numpy as np
>>> nbytes(np.zeros(3)), nbytes(b"ab"), COLLECTIVE_TAG, MAX_USER_TAG == 2**30
(24, 2, -1, True)
"""

from __future__ import annotations

import numpy as np

Payload = bytes | bytearray | memoryview | np.ndarray

# Tags >= 0 are the user's. Collectives use COLLECTIVE_TAG; backends may reserve more below it.
COLLECTIVE_TAG = -1
MAX_USER_TAG = 2**30


def nbytes(data: Payload) -> int:
    """Size of a payload in bytes."""
    if isinstance(data, np.ndarray):
        return data.nbytes
    return memoryview(data).nbytes


__all__ = ["COLLECTIVE_TAG", "MAX_USER_TAG", "Payload", "nbytes"]
