"""Socket and host TCP tuning, and reading TCP_INFO / nstat counters.

Public API:

- ``transport_config.TransportConfig``: every TCP knob of a run, its one parser
  (``TransportConfig.parse("rto_min=5ms,rto_min_jitter=100ms,rto_max_offset=100ms", place=...)``),
  where each knob is applied (socket options, or a testbed's per-host sysctls and routes),
  per-rank draws (``for_rank``), and which time dilations make a setting expressible
  (``why_not``, ``dilation_range``, ``expressible``).
- ``tcp_info.read(sock)``: a socket's ``TCP_INFO``; ``tcp_info.rto_counters(socks)`` and
  ``tcp_info.rto_delta(before, after)``: retransmission counters of a set of connections and
  the time they waited on retransmission timeouts (for time attribution).
"""
