"""Communication errors (defined with the wire format in ``clusterlab.rendezvous.errors``, which
the launcher side uses too); each names the peer rank involved, so a failed job says who died."""

from clusterlab.rendezvous.errors import CommError, CommTimeout, JobTimeout, PeerFailure, ProtocolError

__all__ = ["CommError", "CommTimeout", "JobTimeout", "PeerFailure", "ProtocolError"]
