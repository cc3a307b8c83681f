"""Which address a rank's mesh listener binds to, chosen as Gloo picks a device: a named
address or interface if one is given, else the source address of this host's route towards
a peer (the launcher, or another host of the job), else loopback.

Route look-ups use a UDP socket's ``connect``, which asks the kernel's routing table and sends
nothing.

>>> choose(bind="10.1.2.3")
'10.1.2.3'
>>> choose(iface="lo")
'127.0.0.1'
>>> choose(towards="127.0.0.1")
'127.0.0.1'
>>> choose()
'127.0.0.1'
"""

from __future__ import annotations

import ipaddress
import socket

from clusterlab.errors import ConfigError
from clusterlab.net.iface import IFF_LOOPBACK, IFF_UP, SIOCGIFADDR, flags, ifreq

LOOPBACK = "127.0.0.1"


def interface_address(name: str) -> str:
    """The IPv4 address of interface ``name`` (``ConfigError`` if it has none)."""
    names = [n for _, n in socket.if_nameindex()]
    if name not in names:
        raise ConfigError(f"interface {name!r} does not exist on this host (it has: {', '.join(names)})")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            return socket.inet_ntoa(ifreq(s, name, SIOCGIFADDR)[20:24])
        except OSError:
            raise ConfigError(f"interface {name!r} has no IPv4 address") from None


def local_addresses() -> list[tuple[str, str]]:
    """``(interface, IPv4 address)`` of every interface that is up, loopback excluded."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                f = flags(s, name)
                if not f & IFF_UP or f & IFF_LOOPBACK:
                    continue
                out.append((name, socket.inet_ntoa(ifreq(s, name, SIOCGIFADDR)[20:24])))
            except OSError:
                continue  # no IPv4 address
    return out


def route_source(dest: str) -> str | None:
    """The source address this host would use towards ``dest`` (None: no route)."""
    try:
        infos = socket.getaddrinfo(dest, 9, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror:
        return None
    for *_, sa in infos:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect(sa)  # a route look-up; UDP connect sends nothing
            except OSError:
                continue
            return s.getsockname()[0]
    return None


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def choose(*, bind: str | None = None, iface: str | None = None, towards: str | None = None) -> str:
    """The address to listen on: ``bind``; else ``iface`` (an interface name, or an address);
    else the source of the route ``towards`` a peer host; else loopback."""
    if bind:
        return bind
    if iface:
        return iface if _is_address(iface) else interface_address(iface)
    if towards:
        src = route_source(towards)
        if src is None:
            raise ConfigError(f"no route from this host towards {towards}; name the interface to use "
                              "(--iface or CLUSTERLAB_IFACE)")
        return src
    return LOOPBACK


def choose_among_peers(mine: list[str], peers: list[list[str]]) -> str:
    """The address to listen on when every rank's candidate addresses are known (``mine`` and
    ``peers[r]`` for each rank, e.g. exchanged through MPI): the source of the route towards
    the first peer on another host (a peer sharing none of ``mine``); loopback when every
    rank is on this host."""
    own = set(mine)
    for addrs in peers:
        if not addrs or own & set(addrs):
            continue  # this host (or a peer without addresses)
        for a in addrs:
            src = route_source(a)
            if src is not None and src in own:
                return src
    return LOOPBACK
