"""Where ranks run: local processes on loopback, the namespace testbed, or mpirun."""
