"""The Communicator interface, its backends (tcp, mpi) and collective algorithms."""

from clusterlab.comm.communicator import COLLECTIVE_TAG, Communicator, Payload
from clusterlab.comm.errors import CommError, CommTimeout, PeerFailure, ProtocolError

__all__ = ["COLLECTIVE_TAG", "CommError", "CommTimeout", "Communicator", "Payload", "PeerFailure", "ProtocolError"]
