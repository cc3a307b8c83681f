"""clusterlab's own TCP mesh backend: framed, authenticated, zero-copy where the OS allows."""

from clusterlab.comm.tcp.mesh import TcpCommunicator, build_mesh, listen, local_mesh

__all__ = ["TcpCommunicator", "build_mesh", "listen", "local_mesh"]
