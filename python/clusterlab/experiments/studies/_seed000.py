"""What seed 000's studies share: its switch (100 PCs on one 155 Mbit/s ATM switch), its
Solaris defaults, and the two scales we run it at."""

from clusterlab.experiments.spec import Testbed, TransportConfig

# One 155 Mbit/s switch, 64 KB output buffer per port, jumbo frames (IP over ATM: MTU 9180);
# a NIC-like host queue (1000 jumbo frames) so that drops happen at the switch, as on the ATM
# switch, not in the hosts' own queues.
SWITCH = Testbed(hosts=16, rate="155Mbit", buffer="64KB", host_queue="9MB", mtu=9000)

# 16 hosts at real rate; the seed's 100 hosts dilated (2 cores cannot serve 100 hosts at
# 155 Mbit/s), at k = 10 where the RTO settings allow it.
SCALES = [{"name": "16 hosts", "hosts": 16, "prefer_dilation": 1.0},
          {"name": "100 hosts", "hosts": 100, "prefer_dilation": 10.0}]

# The TCP stacks every figure compares: this kernel's as it is, and seed-era TCP as the seed's
# Solaris 2.5.1 had it (Reno, initial window 2, no SACK, RACK, tail loss probes, F-RTO or
# timestamps), which loses whole windows and leaves them to the RTO.
STACKS = ["linux", "seed-era"]

# Solaris 2.5.1, the seed's OS: MIN 200 ms, MAX 60 s.
SOLARIS = TransportConfig(rto_min="200ms", rto_max="60s", label="default (MIN 200 ms, MAX 60 s)")

NOTES = ("Seed 000 ran 100 Pentium Pro PCs on one HITACHI AN1000-20 ATM switch (155 Mbit/s UBR, cells "
         "dropped on overflow). Here: Linux network namespaces on one 2-core machine, one bridge with tbf "
         "shaping per port (packets, not cells, are dropped), Linux 6.18 TCP instead of Solaris 2.5.1.")
