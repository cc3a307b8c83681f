"""clusterlab's own TCP mesh backend: framed, authenticated, zero-copy where the OS allows.

``clusterlab.rendezvous.frames`` (wire format) -> ``engine`` (interface; ``engine_rust``,
``engine_python``) -> ``communicator`` (``TcpCommunicator``: policy over one engine) -> ``mesh``
(set-up). ``clusterlab.rendezvous.handshake`` authenticates each connection.
"""

from clusterlab.comm.tcp.communicator import TcpCommunicator
from clusterlab.comm.tcp.mesh import build_mesh, listen, local_mesh

__all__ = ["TcpCommunicator", "build_mesh", "listen", "local_mesh"]
