"""``clusterlab bench storage``: bonnie-style sequential block I/O over iSCSI on the testbed."""

from __future__ import annotations

import json

import click

from clusterlab.cli.options import Int
from clusterlab.errors import ConfigError


@click.command()
@click.option("--hosts", default=8, show_default=True, type=Int(lo=1, hi=1000),
              help="Compute hosts on the testbed (initiators run on the first ones; plus storage host st).")
@click.option("--initiators", default="1..8", show_default=True,
              help="Initiator counts to run: N, LO..HI (powers of two and HI) or a comma list.")
@click.option("--size", default="64MB", show_default=True, help="Bytes written then read by each initiator (its LUN's size).")
@click.option("--block", default="64KB", show_default=True, help="Bytes per SCSI read/write (bonnie's block I/O).")
@click.option("--rate", default="155Mbit", show_default=True, help="Link rate of every host ('none': unshaped).")
@click.option("--connections", default=4, show_default=True, type=Int(lo=1, hi=1024),
              help="iSCSI sessions per initiator: commands in flight at once (1..64; 1: one at a time).")
@click.option("--backing-rate", default="none", show_default=True,
              help="Throttle the target's backing store to this many bytes/s, read and write each "
                   "(e.g. 20MB; shared by all LUNs, O_DIRECT; 'none': unthrottled).")
@click.option("--san", is_flag=True, help="iSCSI on a second switch (separate SAN) instead of the compute switch.")
@click.option("--direct", is_flag=True, help="Target opens its backing files with O_DIRECT (no page cache).")
@click.option("--baseline/--no-baseline", default=True, show_default=True,
              help="Also run the block loop (and bonnie++, if installed) on a local file.")
@click.option("--name", default=None, help="Testbed name (default: a fresh random one).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON result.")
def storage(hosts, initiators, size, block, rate, connections, backing_rate, san, direct, baseline, name, as_json):
    """Sequential block write, then read, on every initiator at once, each on its own LUN of
    a tgt iSCSI target on the testbed's storage host (needs root, tgt and libiscsi).

    \b
    Example:
      clusterlab bench storage --hosts 4 --initiators 1..4 --size 64MB --block 64KB --rate 155Mbit
    """
    from clusterlab.bench.storage import parse_counts
    from clusterlab.experiments.storage_bench import run
    from clusterlab.units import parse_rate, parse_size

    counts = parse_counts(initiators)
    if rate.lower() == "none":
        rate = None
    else:
        parse_rate(rate)
    nbytes, blk = parse_size(size), parse_size(block)
    if nbytes <= 0:
        raise ConfigError(f"--size must be positive, got {size!r}")
    try:
        backing_bps = None if backing_rate.lower() == "none" else parse_size(backing_rate)
    except ConfigError as e:
        raise ConfigError(f"--backing-rate: {e}") from None
    if backing_bps is not None and not 4096 <= backing_bps <= 1 << 40:
        raise ConfigError(f"--backing-rate must be 4KB..1TiB (bytes/s) or none, got {backing_rate!r}")
    if not 1 <= connections <= 64:
        raise ConfigError(f"--connections must be 1..64, got {connections}")
    res = run(hosts=hosts, initiators=counts, size=nbytes, block=blk, rate=rate, baseline=baseline,
              direct=direct, name=name, connections=connections,
              backing_bps=backing_bps, san=san)
    if as_json:
        click.echo(json.dumps(res, indent=1))
        return
    cfg = res["config"]
    click.echo(f"iSCSI (tgt on st, {cfg['rate']}), {size} per initiator in {block} blocks, "
               f"{cfg['connections']} command(s) in flight per initiator")
    for r in res["runs"]:
        per = {op: " ".join(f"{x['mbps']:.1f}" for x in r[op]["per_initiator"]) for op in ("write", "read")}
        click.echo(f"  {r['initiators']} initiator(s): write {r['write']['aggregate_mbps']:8.1f} MB/s "
                   f"[{per['write']}]  read {r['read']['aggregate_mbps']:8.1f} MB/s [{per['read']}]  "
                   f"load {r['load'][0]:.1f}")
    loc = res.get("local")
    if loc:
        click.echo(f"local file ({loc['dir']}): write {loc['write_mbps']:.1f} MB/s  read {loc['read_mbps']:.1f} MB/s")
        b = loc.get("bonnie")
        if isinstance(b, dict) and "error" not in b:
            mbps = {k: f"{b[k]} MB/s" if isinstance(b[k], float) else b[k] for k in ("write_mbps", "read_mbps")}
            click.echo(f"bonnie++ (local): block write {mbps['write_mbps']}  block read {mbps['read_mbps']}")
        elif b:
            click.echo(f"bonnie++: {b.get('error', b) if isinstance(b, dict) else b}")
