"""Benchmarks: ping-pong, collectives, all-to-all broadcast, storage."""
