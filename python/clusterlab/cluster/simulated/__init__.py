"""A testbed topology simulated in SimGrid's flow-level model (``Simulated``), the platform
built from the same ``StarTopo`` (``platform``), the engine run as its own process (``run``,
``engine.py``). See docs/simulation.md."""
