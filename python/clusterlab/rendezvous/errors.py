"""Communication errors. Each names the peer rank involved, so a failed job says who died."""

from __future__ import annotations

from clusterlab.errors import ClusterlabError


class CommError(ClusterlabError):
    """Base class of communication failures."""


class PeerFailure(CommError):
    """A peer rank died or closed its connections."""

    def __init__(self, rank: int, detail: str = ""):
        self.rank = rank
        super().__init__(f"rank {rank} failed{': ' + detail if detail else ''}")


class CommTimeout(CommError):
    """A blocking wait exceeded its timeout."""


class JobTimeout(CommTimeout):
    """A whole job ran past the limit its launcher was given (not one wait: a caller can name
    the setting that sets it)."""


class ProtocolError(CommError):
    """A peer sent a frame that breaks the protocol (bad magic, oversize, failed authentication)."""
