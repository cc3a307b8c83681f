"""``clusterlab testbed up|down|clean|status|exec``: the namespace cluster by hand."""

from __future__ import annotations

import json
import os
import sys

import click

from clusterlab.cli.options import Finite, Int, transport_options
from clusterlab.errors import ConfigError


def topo_options(f):
    """Options describing the network (shared with ``bench broadcast``)."""
    for opt in reversed([
        click.option("--rate", default="155Mbit", show_default=True, help="Link rate (tc syntax)."),
        click.option("--switch", type=click.Choice(["bridge", "atm"]), default="bridge", show_default=True,
                     help="bridge: a Linux bridge, tbf per port, whole packets dropped. atm: an ATM cell switch "
                          "(AAL5 cells interleaved at output ports, a cell buffer per port, frames lost at "
                          "reassembly; --rate is the line rate, 26/27 of it carries cells)."),
        click.option("--host-rate", "host_rates", multiple=True, metavar="HOST=RATE",
                     help="One host's link at its own rate (both directions), e.g. --host-rate h3=15.5Mbit; "
                          "repeatable. Bridge switch only."),
        click.option("--loss", multiple=True, metavar="HOST:P",
                     help="A lossy link: each cell on HOST's link (either direction) lost with probability P, e.g. "
                          "--loss h3:0.02% (a 9180-byte frame is 192 cells: 3.8% of them lost); repeatable. ATM "
                          "switch only."),
        click.option("--loss-seed", default=1, show_default=True, type=Int(lo=0, hi=2**63 - 1),
                     help="Seed of the lossy links' draws."),
        click.option("--buffer", default="64KB", show_default=True,
                     help="Switch output buffer per port: bytes (64KB), packets (100p) or ATM cells (1000cells)."),
        click.option("--discard", type=click.Choice(["none", "ppd", "epd"]), default="none", show_default=True,
                     help="ATM switch: none (plain UBR), ppd (partial packet discard) or epd (early packet discard)."),
        click.option("--epd-threshold", default=None,
                     help="ATM switch with --discard epd: refuse new frames above this many cells (default: half "
                          "the buffer), e.g. 500cells."),
        click.option("--host-queue", default="1000p", show_default=True,
                     help="Host egress queue: bytes (256KB) or packets (1000p, a NIC's txqueuelen: 9 MB at MTU "
                          "9000). A shallower queue drops when a host bursts, and a flow whose packet it refused "
                          "with nothing in flight waits >= 200 ms (the kernel's fixed probe timer)."),
        click.option("--mtu", default=None, type=Int(lo=68, hi=65000),
                     help="Interface MTU [default: 9000; 9180, IP over ATM's, with --switch atm]."),
        click.option("--dilation", default=1.0, show_default=True, type=Finite(lo=1, hi=1e6),
                     help="Divide rates by k, multiply timers by k, report times divided by k."),
        click.option("--storage/--no-storage", default=False, help="Add a storage host 'st'."),
        click.option("--no-rps", is_flag=True, help="Do not pin receive processing to one CPU per interface."),
        click.option("--offloads/--no-offloads", default=False, show_default=True,
                     help="Keep TSO/GSO/GRO on (off by default: real links carry MTU-sized packets)."),
    ]):
        f = opt(f)
    return f


def wan_options(f):
    """Options of a two-site testbed (seed 004: 4+4 hosts across a WAN line)."""
    for opt in reversed([
        click.option("--sites", default=None, help="Two sites joined by a WAN line: hosts per site, e.g. 4+4 "
                     "(must add up to --hosts). Without it: one switch."),
        click.option("--wan-rate", default="135Mbit", show_default=True, help="WAN line rate per direction."),
        click.option("--wan-delay", default="6ms", show_default=True, help="WAN one-way delay (RTT = 2x)."),
        click.option("--wan-queue", default="256KiB", show_default=True,
                     help="WAN drop-tail queue per direction: bytes, packets (e.g. 30p) or cells (e.g. 5000cells; "
                          "with --wan-cells the queue is counted in cells, bytes / 53)."),
        click.option("--wan-shared", is_flag=True, help="Both directions share one --wan-rate and one queue, "
                     "losing what exceeds it (67M-ATM: the line looped back)."),
        click.option("--wan-cells", is_flag=True, help="The WAN line carries AAL5 cells of 53 bytes: --wan-rate "
                     "is its cells' rate, the queue counts cells, a frame is lost whole when one of its cells "
                     "finds the queue full (its other cells still use the line)."),
        click.option("--wan-discard", type=click.Choice(["none", "ppd", "epd"]), default="none", show_default=True,
                     help="With --wan-cells: the line's discard policy, none (plain UBR), ppd (partial packet "
                          "discard; not with --wan-shared) or epd (early packet discard)."),
        click.option("--wan-epd-threshold", default=None,
                     help="With --wan-discard epd: refuse new frames at this many queued cells or more (default: "
                          "half the queue), e.g. 2500cells."),
    ]):
        f = opt(f)
    return f


def make_topo(hosts, rate, buffer, host_queue, mtu, dilation, storage, switch="bridge", discard="none",
              epd_threshold=None, host_rates=(), loss=(), loss_seed=1, **wan):
    """The topology; ``wan``: ``sites``, ``wan_rate``, ``wan_delay``, ``wan_queue``, ``wan_shared``,
    ``wan_cells``, ``wan_discard``, ``wan_epd_threshold`` (unused without ``sites``, but checked all the same; ``wan_cells`` without
    ``sites`` is refused); ``host_rates``: ``--host-rate`` values; ``loss``: ``--loss`` values."""
    from clusterlab.cluster.testbed import StarTopo

    if wan.get("sites") is None:  # given, even empty, it is checked
        rest = {k: v for k, v in wan.items() if k != "sites"}
        if rest:
            StarTopo(hosts=2, sites="1+1", **rest)  # the WAN options' own checks
        wan = {"wan_cells": True} if rest.get("wan_cells") else {}  # asked for without sites: refused
    return StarTopo(hosts=hosts, rate=rate, buffer=buffer, host_queue=host_queue, mtu=mtu, dilation=dilation,
                    storage=storage, switch=switch, discard=discard, epd_threshold=epd_threshold,
                    host_rates=" ".join(host_rates) if host_rates else None, loss=" ".join(loss) if loss else None,
                    loss_seed=loss_seed, **wan)


@click.group()
def testbed():
    """A cluster of network namespaces on this machine (needs root).

    \b
    Examples:
      clusterlab testbed up --hosts 16 --rate 155Mbit --buffer 64KB --name lab
      clusterlab testbed status
      clusterlab testbed exec lab h3 -- ip -br addr
      clusterlab testbed down lab
      clusterlab testbed clean lab         # after a crash of the program that built it
    """


@testbed.command()
@click.option("--hosts", default=4, show_default=True, type=Int(lo=2, hi=1000))
@click.option("--name", default=None, help="Short name (1-8 lowercase letters/digits); random if omitted.")
@topo_options
@wan_options
@transport_options(testbed_knobs=True, seed=("--seed",), nodelay=False)
@click.option("--json", "as_json", is_flag=True)
def up(hosts, name, rate, switch, host_rates, loss, loss_seed, buffer, discard, epd_threshold, host_queue, mtu, dilation,
       storage, no_rps, offloads, sites, wan_rate, wan_delay, wan_queue, wan_shared, wan_cells, wan_discard,
       wan_epd_threshold, transport, as_json):
    """Bring a testbed up and leave it running (take it down with ``down``).

    \b
    The RTO bounds are per-host sysctls (x --dilation); a setting the kernel cannot take
    is refused with the reason (e.g. a maximum below 1 s needs --dilation).
    Examples:
      clusterlab testbed up --hosts 16 --rate 155Mbit --buffer 64KB --name lab
      clusterlab testbed up --hosts 16 --rto-min 5ms --rto-min-jitter 100ms --seed 1 --name lab
      clusterlab testbed up --hosts 16 --dilation 4 --rto-min 200ms --rto-max-offset 100ms --name lab
      clusterlab testbed up --hosts 8 --rate 100Mbit --sites 4+4 --wan-rate 135Mbit --wan-delay 6ms --name wan
      clusterlab testbed up --hosts 8 --rate 100Mbit --sites 4+4 --wan-rate 135Mbit --wan-shared --name atm67
      clusterlab testbed up --hosts 8 --rate 1Gbit --sites 4+4 --wan-rate 135Mbit --wan-cells --name cells
      clusterlab testbed up --hosts 8 --rate 1Gbit --sites 4+4 --wan-cells --wan-discard epd --name epd
      clusterlab testbed up --hosts 16 --rate 155.52Mbit --switch atm --buffer 1000cells --discard none --name atm
      clusterlab testbed up --hosts 4 --rate 155Mbit --host-rate h3=15.5Mbit --name slow
      clusterlab testbed up --hosts 4 --rate 155.52Mbit --switch atm --loss h3:0.02% --name lossy
    """
    from clusterlab.cluster.testbed import TestbedNetwork
    from clusterlab.net.transport_config import TransportConfig

    if name is not None:  # given, even empty: checked (only an absent name is drawn at random)
        from clusterlab.cluster.testbed.topo import check_name

        check_name(name)
    topo = make_topo(hosts, rate, buffer, host_queue, mtu, dilation, storage, switch, discard, epd_threshold,
                     host_rates, loss, loss_seed, sites=sites, wan_rate=wan_rate, wan_delay=wan_delay, wan_queue=wan_queue,
                     wan_shared=wan_shared, wan_cells=wan_cells, wan_discard=wan_discard,
                     wan_epd_threshold=wan_epd_threshold)
    config = TransportConfig.parse(transport, place="testbed")
    tb = TestbedNetwork(topo, name=name, transport=config, rps=not no_rps, offloads_off=not offloads, keep=True).up()
    info = {"name": tb.name, "hosts": len(tb.hosts), "seconds": round(tb.timings["up"], 3),
            "warnings": tb.warnings}
    if as_json:
        click.echo(json.dumps(info))
    else:
        buffers = (f"an ATM cell switch with {topo.buffer_cells}-cell port buffers, discard {topo.discard}"
                   if topo.switch == "atm" else f"{topo.buffer_bytes} B port buffers")
        click.echo(f"testbed {tb.name}: {len(tb.hosts)} hosts up in {tb.timings['up']:.2f} s "
                   f"({topo.rate} links, {buffers}, MTU {topo.mtu})")
        if topo.host_rates:
            click.echo(f"links at their own rate: {topo.host_rates.replace(' ', ', ')}"
                       + (f" (/ {topo.dilation:g} by dilation)" if topo.dilation != 1 else ""))
        for i, p in topo.line_loss().items():
            click.echo(f"lossy link: {topo.host_names()[i]} loses {p:.3%} of its cells each way (an MTU frame: "
                       f"{topo.frame_loss(i):.2%}), seed {topo.loss_seed}")
        if topo.has_wan:
            queue = (f"{topo.wan_queue_cells}-cell queue, AAL5 cells of 53 bytes ({topo.wan_ip_rate_bps() / 1e6:.1f} "
                     f"Mbit/s of IP at MTU {topo.mtu}), discard {topo.wan_discard}"
                     + (f" at {topo.wan_epd_threshold_cells} cells" if topo.wan_discard == "epd" else "")
                     if topo.wan_cells else f"{topo.wan_queue_bytes} B queue")
            click.echo(f"sites {'+'.join(map(str, topo.site_sizes))} joined by a WAN line: {topo.wan_rate} "
                       f"{'shared by both directions' if topo.wan_shared else 'per direction'}, "
                       f"{topo.wan_delay} one way, {queue}")
        for w in tb.warnings:
            click.echo(f"warning: {w}", err=True)


@testbed.command()
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Every clusterlab testbed.")
def down(name, all_):
    """Take testbed NAME down (its processes are killed).

    \b
    Examples:
      clusterlab testbed down lab
      clusterlab testbed down --all        # every clusterlab testbed on this machine
    """
    from clusterlab.cluster.testbed import clean
    from clusterlab.cluster.testbed.topo import check_name

    if not name and not all_:
        raise ConfigError("name a testbed or pass --all")
    res = clean(None if all_ else check_name(name))
    click.echo(f"removed {res['namespaces']} namespaces, killed {res['processes']} processes")


@testbed.command("clean")
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Every clusterlab testbed on this machine (also other users').")
def clean_cmd(name, all_):
    """Remove testbed NAME's namespaces, links and processes, whatever state they were left in
    (after a crash or a SIGKILL of its driver).

    \b
    Examples:
      clusterlab testbed clean lab
      clusterlab testbed clean --all       # every clusterlab testbed on this machine
    """
    from clusterlab.cluster.testbed import clean, leftovers
    from clusterlab.cluster.testbed.topo import check_name

    if not name and not all_:
        raise ConfigError("name the testbed to clean (clusterlab testbed status lists them), or pass --all "
                          "to remove every clusterlab testbed on this machine")
    if name and all_:
        raise ConfigError("give a testbed name or --all, not both")
    target = None if all_ else check_name(name)
    res = clean(target)
    left = leftovers(target)
    if target is not None:
        left["links"] = [n for n in left["links"] if n.startswith("clab" + target)]
    click.echo(f"removed {res['namespaces']} namespaces, {res['links']} links, killed {res['processes']} processes")
    if any(left.values()):
        raise ConfigError(f"still present after clean: {left}")


@testbed.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
def status(name, as_json):
    """List testbeds (or describe NAME).

    \b
    Examples:
      clusterlab testbed status
      clusterlab testbed status lab --json
    """
    from clusterlab.cluster.testbed.clean import namespaces, state_files

    names = sorted({os.path.basename(f)[:-5] for f in state_files()} |
                   {ns.split("-")[1] for ns in namespaces()})
    if name:
        names = [n for n in names if n == name]
        if not names:
            raise ConfigError(f"no testbed named {name}")
    out = []
    for n in names:
        nss = namespaces(n)
        d = {"name": n, "namespaces": len(nss)}
        from clusterlab.cluster.testbed.clean import STATE_DIR
        path = os.path.join(STATE_DIR, f"{n}.json")
        try:
            with open(path) as f:
                st = json.load(f)
            if not (isinstance(st, dict) and isinstance(st.get("hosts"), list) and isinstance(st.get("topo"), dict)):
                raise ValueError("not a testbed's state")
            d.update(hosts=len(st["hosts"]), topo=st["topo"], driver_pid=st.get("driver_pid"))
        except FileNotFoundError:
            d["note"] = f"no state file (left by a crashed driver? run clusterlab testbed clean {n})"
        except (OSError, ValueError) as e:
            d["note"] = f"damaged state file {path} ({e}): run clusterlab testbed clean {n}"
        out.append(d)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    if not out:
        click.echo("no clusterlab testbeds")
    for d in out:
        topo = d.get("topo", {})
        wan = ""
        if topo.get("sites"):
            wan = (f", sites {'+'.join(map(str, topo['sites']))}, WAN {topo['wan_rate_bps'] / 1e6:g} Mbit/s"
                   f"{' shared' if topo['wan_shared'] else ''}"
                   f"{' of cells' if topo.get('wan_cells') else ''} {topo['wan_delay_seconds'] * 1e3:g} ms one way"
                   + (f", discard {topo['wan_discard']}" if topo.get("wan_discard") else ""))
        click.echo(f"{d['name']}: {d['namespaces']} namespaces, {d.get('hosts', '?')} hosts, "
                   f"{topo.get('rate', '?')} links"
                   + (f" ({topo['host_rates'].replace(' ', ', ')})" if topo.get("host_rates") else "")
                   + (f" (lossy: {topo['loss'].replace(' ', ', ')} of cells)" if topo.get("loss") else "")
                   + f", buffer {topo.get('buffer_bytes', '?')} B{wan}"
                   + (f"  ({d['note']})" if "note" in d else ""))


@testbed.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(name, host, command):
    """Run COMMAND inside HOST of testbed NAME (``sw`` is the switch, ``wan`` the WAN router).

    \b
    Examples:
      clusterlab testbed exec lab h3 -- ip -br addr
      clusterlab testbed exec lab sw -- tc -s qdisc show dev p0
    """
    from clusterlab.cluster.testbed import TestbedNetwork

    tb = TestbedNetwork.attach(name)
    node = tb.switch if host == "sw" else tb.router if host == "wan" and tb.router else tb.host(host)
    sys.stdout.flush()
    os.execvp("ip", node.prefix() + list(command))
