"""Declarative experiments reproducing the seed studies."""
