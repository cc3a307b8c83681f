"""The package's import graph: no two modules import each other (directly or round a loop), and
every package imports only the layers below it (docs/layout.md: data -> kernels -> parallel
algorithms on a Communicator -> clusters -> studies -> reports).

Read from the source with ``ast``: every ``import`` (also inside functions, so a lazy import
counts) and every ``importlib.import_module`` / ``importlib.util.find_spec`` / ``__import__`` of a
literal name. ``from clusterlab import _core`` names the compiled extension module, not the
package's ``__init__``. Below the cluster layer even a string may not name a cluster module (a
name kept for a later dynamic import, ``python -m clusterlab.cluster...`` in a child's argv, an
f-string by its literal prefix); documentation and prose aside.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "python"

# What each bottom layer may import from clusterlab (its own package always).
LOW = {
    "clusterlab.errors": set(),
    "clusterlab.units": {"clusterlab.errors"},
    "clusterlab._atomic": {"clusterlab.errors"},
    "clusterlab.data": {"clusterlab._core", "clusterlab.errors", "clusterlab._atomic", "clusterlab.units"},
}


# Every package of clusterlab, lowest first: each may import only those before it. ``clusterlab``
# is the package's own ``__init__`` (the top-level API: ``clusterlab.mine``...).
LAYERS = ["errors", "units", "_atomic", "_core", "data", "storage", "net", "rendezvous", "comm", "mining",
          "clusterlab", "npb", "monitor", "bench", "cluster", "experiments", "tune", "report", "diagnose", "cli", "__main__"]

# Where ranks run is the cluster layer's: these never import it, not even inside a function.
NEVER_CLUSTER = ("comm", "mining", "npb", "bench", "monitor", "rendezvous")

_IMPORTERS = {"import_module", "find_spec", "__import__"}
_MODULE_NAME = re.compile(r"clusterlab(\.[A-Za-z_]\w*)+")  # a string that is a module's name


def _modules() -> dict[str, pathlib.Path | None]:
    mods: dict[str, pathlib.Path | None] = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    mods["clusterlab._core"] = None  # the extension (built by maturin), imports nothing of ours
    return mods


_GRAPHS: dict[pathlib.Path, dict[str, set[str]]] = {}


def _graph() -> dict[str, set[str]]:
    """The module graph under ``ROOT`` (parsed once per root)."""
    if ROOT not in _GRAPHS:
        _GRAPHS[ROOT] = _parse_graph()
    return _GRAPHS[ROOT]


def _parse_graph() -> dict[str, set[str]]:
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        if p is None:
            continue
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name in _IMPORTERS:
                    targets = [node.args[0].value]
            for t in targets:
                r = resolve(t) if t.startswith("clusterlab") else None
                if r and r != m:
                    edges[m].add(r)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_module_imports_itself_round_a_loop():
    assert _cycles(_graph()) == []


def test_cycle_finder_finds_a_loop():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("layer", sorted(LOW))
def test_bottom_layers_import_nothing_above_them(layer):
    edges = _graph()
    bad = sorted(
        f"{m} -> {t}"
        for m, ts in edges.items()
        if m == layer or m.startswith(layer + ".")
        for t in ts
        if not (t == layer or t.startswith(layer + ".")) and t not in LOW[layer]
    )
    assert bad == []


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _package_edges(edges: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for m, ts in edges.items():
        for t in ts:
            a, b = _package(m), _package(t)
            if a != b:
                out.setdefault((a, b), []).append(f"{m} -> {t}")
    return out


def test_every_package_has_a_layer():
    pkgs = {_package(m) for m in _modules()}
    assert sorted(pkgs - set(LAYERS)) == [], "place the new package in LAYERS (and docs/layout.md)"
    assert sorted(set(LAYERS) - pkgs) == []


def test_every_package_imports_only_layers_below_it():
    rank = {p: i for i, p in enumerate(LAYERS)}
    bad = sorted(x for (a, b), xs in _package_edges(_graph()).items() if rank[b] > rank[a] for x in xs)
    assert bad == []


@pytest.mark.parametrize("package", NEVER_CLUSTER)
def test_no_cluster_import_below_the_cluster_layer(package):
    bad = sorted(x for (a, b), xs in _package_edges(_graph()).items() if a == package and b == "cluster" for x in xs)
    assert bad == []


def _named_modules(path: pathlib.Path) -> set[str]:
    """The clusterlab modules a file names in strings other than documentation: a whole string
    that is a module name (``"clusterlab.cluster.rank"``), or an f-string's literal
    ``clusterlab.x.`` prefix."""
    tree = ast.parse(path.read_text(), str(path))
    docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                and _MODULE_NAME.fullmatch(node.value):
            out.add(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            m = _MODULE_NAME.match(str(node.values[0].value))
            if m:
                out.add(m.group(0))
    return out


@pytest.mark.parametrize("package", NEVER_CLUSTER)
def test_no_string_below_the_cluster_layer_names_a_cluster_module(package):
    bad = sorted(f"{p.relative_to(ROOT)}: {name}" for p in (ROOT / "clusterlab" / package).rglob("*.py")
                 for name in _named_modules(p) if _package(name) == "cluster")
    assert bad == []


def test_lazy_and_dynamic_imports_are_seen(tmp_path, monkeypatch):
    """A function-level import and an importlib call both count (the checks above would pass
    vacuously otherwise)."""
    pkg = tmp_path / "clusterlab"
    (pkg / "mining").mkdir(parents=True)
    (pkg / "cluster").mkdir()
    for d in (pkg, pkg / "mining", pkg / "cluster"):
        (d / "__init__.py").write_text("")
    (pkg / "cluster" / "local.py").write_text("")
    (pkg / "mining" / "a.py").write_text("def f():\n    from clusterlab.cluster import local\n")
    (pkg / "mining" / "b.py").write_text("import importlib\nimportlib.import_module('clusterlab.cluster.local')\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    edges = _graph()
    assert edges["clusterlab.mining.a"] == {"clusterlab.cluster.local"}
    assert edges["clusterlab.mining.b"] == {"clusterlab.cluster.local"}


def test_module_names_in_strings_are_seen(tmp_path):
    """A name built for a dynamic import or a child's ``-m`` counts; a docstring or a message
    that mentions a module does not."""
    f = tmp_path / "m.py"
    f.write_text('"""Runs on clusterlab.cluster.local."""\nimport importlib\n'
                 "ARGV = ['python', '-m', 'clusterlab.cluster.rank']\n"
                 "def f(x):\n    \"\"\"see clusterlab.cluster\"\"\"\n"
                 "    return importlib.import_module(f'clusterlab.cluster.{x}'), 'use clusterlab.cluster.Local()'\n")
    assert _named_modules(f) == {"clusterlab.cluster.rank", "clusterlab.cluster"}
