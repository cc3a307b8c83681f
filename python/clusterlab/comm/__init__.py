"""The Communicator interface, its backends (tcp, mpi) and collective algorithms."""

from clusterlab.comm.communicator import COLLECTIVE_TAG, Communicator, Payload
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.world import world

# The algorithms register with the cost model on import (the model never imports them), so
# anything in clusterlab.comm finds the model ready to price them.
from clusterlab.comm import collectives  # noqa: E402,F401  isort: skip

__all__ = ["COLLECTIVE_TAG", "CommError", "CommTimeout", "Communicator", "Payload", "PeerFailure", "ProtocolError", "world"]
