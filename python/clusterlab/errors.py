"""Errors that clusterlab raises on purpose: each one says what was wrong and where.

The CLI prints them as one line (no traceback) and exits with status 2.
"""

from __future__ import annotations


class ClusterlabError(Exception):
    """Base class of clusterlab's own errors."""


class ConfigError(ClusterlabError, ValueError):
    """A setting is impossible or out of range (the message names it and the accepted range)."""


class BasketFormatError(ClusterlabError, ValueError):
    """A basket file is malformed.

    >>> e = BasketFormatError("data.dat", 3, 5, "negative item")
    >>> str(e)
    'data.dat:3:5: negative item'
    """

    def __init__(self, path: str, line: int, column: int, message: str):
        self.path, self.line, self.column, self.message = str(path), line, column, message
        super().__init__(f"{self.path}:{line}:{column}: {message}")


class TooManyItemsets(ConfigError):
    """Mining stopped because it found more itemsets than ``max_itemsets`` (a pattern explosion).

    ``reached`` is the number counted when every thread stopped, ``limit`` the cap."""

    def __init__(self, message: str, reached: int, limit: int):
        self.reached, self.limit = int(reached), int(limit)
        super().__init__(message)
