"""The rank side of ``cluster.local.run``: ``python -m clusterlab.cluster.rank MODULE:FUNCTION
ARGS_JSON`` joins the job (``clusterlab.comm.world()``), calls ``FUNCTION(comm, *args)`` and
sends the return value to the launcher (JSON, or raw bytes; nothing is pickled). An exception
is reported to the launcher and the peers by ``world()``'s exit hook.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys

from clusterlab.comm.world import send_result, world
from clusterlab.rendezvous import contract


def resolve(target: str):
    """The function named by ``module:qualname`` or ``/path/script.py:qualname``."""
    mod, _, qual = target.rpartition(":")
    if mod.endswith(".py"):
        spec = importlib.util.spec_from_file_location("__clusterlab_main__", mod)
        m = importlib.util.module_from_spec(spec)
        sys.modules["__clusterlab_main__"] = m
        spec.loader.exec_module(m)
    else:
        m = importlib.import_module(mod)
    obj = m
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _json_default(o):
    import numpy as np

    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"return value of type {type(o).__name__} is not JSON-serialisable")


def call(target: str, args_json: str) -> int:
    comm = world()
    args = json.loads(args_json)
    value = resolve(target)(comm, *args)
    if isinstance(value, (bytes, bytearray, memoryview)):
        body, tag = bytes(value), contract.RESULT_BYTES_TAG
    else:
        body, tag = json.dumps(value, default=_json_default).encode(), contract.RESULT_JSON_TAG
    send_result(body, tag)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m clusterlab.cluster.rank MODULE:FUNCTION ARGS_JSON", file=sys.stderr)
        return 2
    return call(argv[0], argv[1])


if __name__ == "__main__":
    sys.exit(main())
