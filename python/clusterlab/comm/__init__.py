"""The Communicator interface, its backends (tcp, mpi) and collective algorithms."""

from clusterlab.comm.communicator import COLLECTIVE_TAG, Communicator, Payload
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError
from clusterlab.comm.world import world

__all__ = ["COLLECTIVE_TAG", "CommError", "CommTimeout", "Communicator", "Payload", "PeerFailure", "ProtocolError", "world"]
