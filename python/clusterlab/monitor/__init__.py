"""Samplers at 0.1 s: traffic per interface and per 64-byte packet-length bucket, qdisc drops
and backlog, TCP retransmissions and timeouts, CPU, disk I/O; one tidy table per run."""

from clusterlab.monitor.sampler import Monitor, Target, read_table, write_table

__all__ = ["Monitor", "Target", "read_table", "write_table"]
