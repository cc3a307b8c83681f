"""Basket data: the CSR ``Baskets`` container, readers and writers, byte-range partitions."""

from clusterlab.data.baskets import Baskets
from clusterlab.data.generate import QuestParams, generate, generate_file  # noqa: F401 (public API)
from clusterlab.data.io import read_baskets, write_baskets
from clusterlab.data.partition import byte_ranges, read_partition

__all__ = ["Baskets", "byte_ranges", "read_baskets", "read_partition", "write_baskets"]
