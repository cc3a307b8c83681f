"""``clusterlab testbed up|down|clean|status|exec``: the namespace cluster by hand."""

from __future__ import annotations

import json
import os
import sys

import click

from clusterlab.errors import ConfigError


def topo_options(f):
    """Options describing the network (shared with ``bench broadcast``)."""
    for opt in reversed([
        click.option("--rate", default="155Mbit", show_default=True, help="Link rate (tc syntax)."),
        click.option("--buffer", default="64KB", show_default=True, help="Switch output buffer per port (bytes)."),
        click.option("--host-queue", default="256KB", show_default=True,
                     help="Host egress queue (bytes). Modest, so RTTs stay short; when a host bursts more "
                          "than this it drops locally, and a flow with nothing in flight then waits >= 200 ms "
                          "(TCP's probe timer). A NIC-like 1000 packets: 9MB at MTU 9000."),
        click.option("--mtu", default=9000, show_default=True, type=int, help="Interface MTU."),
        click.option("--dilation", default=1.0, show_default=True, type=float,
                     help="Divide rates by k, multiply timers by k, report times divided by k."),
        click.option("--storage/--no-storage", default=False, help="Add a storage host 'st'."),
        click.option("--no-rps", is_flag=True, help="Do not pin receive processing to one CPU per interface."),
        click.option("--offloads/--no-offloads", default=False, show_default=True,
                     help="Keep TSO/GSO/GRO on (off by default: real links carry MTU-sized packets)."),
        click.option("--tb-seed", default=0, show_default=True, type=int, help="Seed of the per-host draws."),
    ]):
        f = opt(f)
    return f


def make_topo(hosts, rate, buffer, host_queue, mtu, dilation, storage):
    from clusterlab.cluster.testbed import StarTopo

    return StarTopo(hosts=hosts, rate=rate, buffer=buffer, host_queue=host_queue, mtu=mtu, dilation=dilation,
                    storage=storage)


@click.group()
def testbed():
    """A cluster of network namespaces on this machine (needs root).

    \b
    Example:
      clusterlab testbed up --hosts 16 --rate 155Mbit --buffer 64KB --name lab
      clusterlab testbed exec lab h3 -- ip -br addr
      clusterlab testbed down lab
    """


@testbed.command()
@click.option("--hosts", default=4, show_default=True, type=int)
@click.option("--name", default=None, help="Short name (1-8 lowercase letters/digits); random if omitted.")
@topo_options
@click.option("--rto-min", default=None, help="Per-host minimum RTO (namespace sysctl), e.g. 5ms.")
@click.option("--rto-jitter", default=None, help="Per-host random extra on the minimum RTO, e.g. 100ms.")
@click.option("--rto-max", default=None, help="Per-host maximum RTO (1s..120s), e.g. 1s.")
@click.option("--rmem", default=None, help="tcp_rmem: one size or 'min default max'.")
@click.option("--wmem", default=None, help="tcp_wmem: one size or 'min default max'.")
@click.option("--json", "as_json", is_flag=True)
def up(hosts, name, rate, buffer, host_queue, mtu, dilation, storage, no_rps, offloads, tb_seed,
       rto_min, rto_jitter, rto_max, rmem, wmem, as_json):
    """Bring a testbed up and leave it running (take it down with ``down``)."""
    from clusterlab.cluster.testbed import TcpSettings, Testbed

    topo = make_topo(hosts, rate, buffer, host_queue, mtu, dilation, storage)
    tcp = TcpSettings(rto_min=rto_min, rto_jitter=rto_jitter, rto_max=rto_max, rmem=rmem, wmem=wmem,
                      seed=tb_seed, dilation=dilation)
    tb = Testbed(topo, name=name, tcp=tcp, rps=not no_rps, offloads_off=not offloads, keep=True).up()
    info = {"name": tb.name, "hosts": len(tb.hosts), "seconds": round(tb.timings["up"], 3),
            "warnings": tb.warnings}
    if as_json:
        click.echo(json.dumps(info))
    else:
        click.echo(f"testbed {tb.name}: {len(tb.hosts)} hosts up in {tb.timings['up']:.2f} s "
                   f"({topo.rate} links, {topo.buffer_bytes} B port buffers, MTU {topo.mtu})")
        for w in tb.warnings:
            click.echo(f"warning: {w}", err=True)


@testbed.command()
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Every clusterlab testbed.")
def down(name, all_):
    """Take testbed NAME down (its processes are killed)."""
    from clusterlab.cluster.testbed import clean
    from clusterlab.cluster.testbed.topo import check_name

    if not name and not all_:
        raise ConfigError("name a testbed or pass --all")
    res = clean(None if all_ else check_name(name))
    click.echo(f"removed {res['namespaces']} namespaces, killed {res['processes']} processes")


@testbed.command("clean")
def clean_cmd():
    """Remove every clusterlab namespace, link and process, whatever state they were left in."""
    from clusterlab.cluster.testbed import clean, leftovers

    res = clean(None)
    left = leftovers(None)
    click.echo(f"removed {res['namespaces']} namespaces, {res['links']} links, killed {res['processes']} processes")
    if any(left.values()):
        raise ConfigError(f"still present after clean: {left}")


@testbed.command()
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True)
def status(name, as_json):
    """List testbeds (or describe NAME)."""
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
        try:
            st = json.load(open(os.path.join(STATE_DIR, f"{n}.json")))
            d.update(hosts=len(st["hosts"]), topo=st["topo"], driver_pid=st.get("driver_pid"))
        except (OSError, ValueError):
            d["note"] = "no state file (left by a crashed driver? run clusterlab testbed clean)"
        out.append(d)
    if as_json:
        click.echo(json.dumps(out, indent=1))
        return
    if not out:
        click.echo("no clusterlab testbeds")
    for d in out:
        topo = d.get("topo", {})
        click.echo(f"{d['name']}: {d['namespaces']} namespaces, {d.get('hosts', '?')} hosts, "
                   f"{topo.get('rate', '?')} links, buffer {topo.get('buffer_bytes', '?')} B"
                   + (f"  ({d['note']})" if "note" in d else ""))


@testbed.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("name")
@click.argument("host")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(name, host, command):
    """Run COMMAND inside HOST of testbed NAME (``sw`` is the switch)."""
    from clusterlab.cluster.testbed import Testbed

    tb = Testbed.attach(name)
    node = tb.switch if host == "sw" else tb.host(host)
    sys.stdout.flush()
    os.execvp("ip", node.prefix() + list(command))
