"""Frequent itemsets and association rules, sequential and parallel."""
