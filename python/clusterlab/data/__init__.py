"""Basket data: the CSR ``Baskets`` container, readers and writers, byte-range partitions."""

from clusterlab.data.baskets import Baskets
from clusterlab.data.generate import QuestParams as QuestParams, generate as generate, generate_file as generate_file
from clusterlab.data.io import read_baskets, write_baskets
from clusterlab.data.partition import byte_ranges, read_partition

__all__ = ["Baskets", "byte_ranges", "read_baskets", "read_partition", "write_baskets"]
