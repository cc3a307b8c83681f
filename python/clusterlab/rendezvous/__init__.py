"""The launcher <-> rank contract, at the bottom of the communication stack: the environment a
launcher gives its ranks and what the two say (``contract``), which address a rank listens on
(``address``), the authenticated handshake every connection starts with (``handshake``), the
frames every link carries (``frames``, also the TCP mesh's wire format) and the errors they raise
(``errors``).

``clusterlab.comm`` (the rank's side: ``world()``) and ``clusterlab.cluster`` (the launchers) both
import this package; it imports neither, nor anything above ``clusterlab.errors``.
"""
