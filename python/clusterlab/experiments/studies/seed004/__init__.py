"""Seed 004 (NPB over a 90 km ATM line): what its studies share."""

# The seed's set-up, as its text gives it.
SETUP = [
    ("nodes", "8 PCs (Fast-PC: Xeon 733 MHz, 512 MB), BSD/OS 3.1, MPI LAM 6.4, NPB 2.3"),
    ("network", "100M-LAN (100Base-T switch, ping RTT 226 us); 4 + 4 PCs on GbE LANs joined by 135M-ATM (90 km, "
                "135 Mbit/s each way, RTT 12 ms by ping -s 64) or 67M-ATM (the same line looped back: 67 Mbit/s "
                "each way when both send, cell loss beyond)"),
    ("TCP defaults", "BSD/OS 3.1's TCP"),
    ("repetitions", "not stated"),
]
