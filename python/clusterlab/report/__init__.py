"""Plots (matplotlib) and Markdown/HTML reports of runs."""
