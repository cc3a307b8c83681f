"""The Communicator interface, its backends (tcp, mpi) and collective algorithms."""
