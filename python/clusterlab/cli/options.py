"""Options shared by several commands: the transport settings (one declaration, one parser).

``@transport_options()`` adds ``--transport KEY=VALUE,...`` and one option per knob, and hands
the command a single ``transport`` argument: the mapping of the knobs given (unset ones
left out), for ``TransportConfig.parse(transport, place=...)`` once the command knows where
the run happens (``socket`` on the local/MPI cluster, ``testbed`` on a namespace testbed).
A knob given both ways is an error.
"""

from __future__ import annotations

import functools

import click

from clusterlab.errors import ConfigError
from clusterlab.units import parse_duration, parse_float, parse_int, parse_rate, parse_size


def _option_name(param) -> str:
    opts = getattr(param, "opts", None) or []
    return max(opts, key=len) if opts else (param.human_readable_name if param is not None else "value")


class _Quantity(click.ParamType):
    """A click type over a ``clusterlab.units`` parser: a bad value is one line naming the option."""

    def __init__(self, parse, name: str, keep_text: bool = False, **bounds):
        self.parse, self.name, self.keep_text, self.bounds = parse, name, keep_text, bounds

    def convert(self, value, param, ctx):
        if value is None:
            return None
        v = self.parse(value, _option_name(param), **self.bounds)
        return value if self.keep_text else v


def Finite(lo: float | None = None, hi: float | None = None) -> click.ParamType:  # noqa: N802 - a type
    """A finite number (no nan, inf or 1e400), ``lo <= x <= hi``."""
    return _Quantity(parse_float, "float", lo=lo, hi=hi)


def Int(lo: int | None = None, hi: int | None = None) -> click.ParamType:  # noqa: N802
    """A whole number, ``lo <= n <= hi``."""
    return _Quantity(parse_int, "integer", lo=lo, hi=hi)


def Size(keep_text: bool = False, **bounds) -> click.ParamType:  # noqa: N802
    """Bytes with a unit (``50KB``, ``1MiB``); ``keep_text``: checked, handed on as typed."""
    return _Quantity(parse_size, "size", keep_text, **bounds)


def Duration(keep_text: bool = False, **bounds) -> click.ParamType:  # noqa: N802
    """Seconds with a unit (``5ms``)."""
    return _Quantity(parse_duration, "duration", keep_text, **bounds)


def Rate(keep_text: bool = False, **bounds) -> click.ParamType:  # noqa: N802
    """Bit/s with a unit (``155Mbit``)."""
    return _Quantity(parse_rate, "rate", keep_text, **bounds)


FINITE = Finite()


class OutputPath(click.Path):
    """An output file or directory, checked for writability when the command line is read, so
    before any work (``clusterlab._atomic.check_output``: the one check of every output)."""

    def __init__(self, directory: bool = False, empty_ok: bool = False):
        super().__init__(file_okay=not directory, dir_okay=directory)
        self.directory, self.empty_ok = directory, empty_ok

    def convert(self, value, param, ctx):
        from clusterlab._atomic import check_output

        if value is None or (value == "" and self.empty_ok):
            return value
        value = super().convert(value, param, ctx)
        check_output(value, _option_name(param), directory=self.directory)
        return value

# (option names, parameter, help): one name per setting, the TransportConfig field's.
_KNOBS = (
    (("--rto-min",), "rto_min", "Minimum RTO, e.g. 5ms (socket option: 5ms..200ms; testbed: per-host sysctl, "
                                "any value up to the maximum RTO)."),
    (("--rto-min-jitter",), "rto_min_jitter",
     "Each rank (host) draws its minimum RTO from [rto-min, rto-min + jitter], e.g. 100ms."),
    (("--rto-max",), "rto_max", "Maximum RTO (the kernel accepts 1s..120s; on a testbed after x dilation)."),
    (("--rto-max-jitter",), "rto_max_jitter", "Each rank draws its maximum RTO from [rto-max, rto-max + jitter]."),
    (("--rto-max-offset",), "rto_max_offset",
     "Each rank's maximum RTO is its own minimum + this (seed 000: 100ms; below 1s needs a dilated testbed)."),
    (("--congestion",), "congestion", "TCP congestion control per socket, e.g. reno, cubic, bbr."),
    (("--sndbuf",), "sndbuf", "SO_SNDBUF per socket, e.g. 4MB (default: kernel autotuning)."),
    (("--rcvbuf",), "rcvbuf", "SO_RCVBUF per socket."),
)
_TESTBED_KNOBS = (
    (("--initcwnd",), "initcwnd", "Initial congestion window in segments (a route attribute of each host; "
                                  "Linux: 10, seed 000's era: 1-2)."),
    (("--rmem",), "rmem", "tcp_rmem of each host: one size or 'min default max'."),
    (("--wmem",), "wmem", "tcp_wmem of each host: one size or 'min default max'."),
)


def renamed_options(*names: str):
    """Hidden options for the old spellings ``names`` (e.g. ``--rto-jitter``): given, they are
    refused naming the new option, never taken silently."""
    from clusterlab.net.transport_config import check_name

    def refuse(ctx, param, value):
        if value is not None:
            check_name(param.opts[0].lstrip("-"), "option")
        return value

    def deco(f):
        for name in names:
            f = click.option(name, f"_renamed_{name.lstrip('-').replace('-', '_')}", hidden=True, default=None,
                             expose_value=False, callback=refuse, is_eager=True)(f)
        return f

    return deco


def transport_options(testbed_knobs: bool = False, seed: tuple[str, ...] = ("--seed",), nodelay: bool = True):
    """Declare the transport options of a command. ``testbed_knobs``: also the per-host knobs
    only a testbed can set. ``seed``: the option name(s) of the per-rank draws' seed (``()``:
    none). ``nodelay``: offer ``--no-nodelay``."""
    knobs = _KNOBS + (_TESTBED_KNOBS if testbed_knobs else ())

    def deco(f):
        @functools.wraps(f)
        def wrapper(*args, **kw):
            spec: dict[str, object] = {}
            text = kw.pop("transport_text", None)
            if text:
                from clusterlab.net.transport_config import check_name

                for part in text.split(","):
                    if part.strip() in ("", "default"):
                        continue
                    if "=" not in part:
                        raise ConfigError(f"--transport: {part.strip()!r} is not key=value")
                    k, v = (x.strip() for x in part.split("=", 1))
                    spec[check_name(k, "--transport setting")] = v
            for _names, param, _help in knobs:
                v = kw.pop(param, None)
                if v is not None:
                    if param in spec:
                        raise ConfigError(f"{param} given both in --transport and as its own option")
                    spec[param] = v
            if seed:
                v = kw.pop("transport_seed", None)
                if v is not None:
                    spec["seed"] = v
            if nodelay and kw.pop("no_nodelay", False):
                spec["nodelay"] = False
            return f(*args, transport=spec, **kw)

        opts = [click.option("--transport", "transport_text", default=None, metavar="KEY=VALUE,...",
                             help="Transport settings in one string, e.g. 'rto_min=5ms,rto_min_jitter=100ms,"
                                  "rto_max_offset=100ms,congestion=reno' (the names of the options below).")]
        for names, param, text in knobs:
            opts.append(click.option(*names, param, default=None, help=text))
        if seed:
            opts.append(click.option(*seed, "transport_seed", type=Int(lo=0, hi=2**32 - 1), default=None,
                                     help="Seed of the per-rank (per-host) draws [default: 0]."))
        if nodelay:
            opts.append(click.option("--no-nodelay", is_flag=True, help="Leave Nagle's algorithm on (TCP_NODELAY off)."))
        for opt in reversed(opts):
            wrapper = opt(wrapper)
        return renamed_options("--rto-jitter", "--cc", *(("--tb-seed",) if "--seed" in seed else ()))(wrapper)

    return deco
