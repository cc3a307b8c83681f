"""Samplers at 0.1 s: traffic, CPU, disk I/O, TCP retransmissions."""
