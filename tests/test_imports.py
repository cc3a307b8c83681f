"""The package's import graph: no two modules import each other (directly or round a loop), and the
bottom layers import nothing above them (docs/architecture: data -> kernels -> mining -> studies).

Read from the source with ``ast`` (every ``import``, also inside functions), so a lazy import that
closes a loop counts as one. ``from clusterlab import _core`` names the compiled extension module,
not the package's ``__init__``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "python"

# What each bottom layer may import from clusterlab (its own package always).
LOW = {
    "clusterlab.errors": set(),
    "clusterlab.units": {"clusterlab.errors"},
    "clusterlab._atomic": {"clusterlab.errors"},
    "clusterlab.data": {"clusterlab._core", "clusterlab.errors", "clusterlab._atomic", "clusterlab.units"},
}


def _modules() -> dict[str, pathlib.Path | None]:
    mods: dict[str, pathlib.Path | None] = {}
    for p in ROOT.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    mods["clusterlab._core"] = None  # the extension (built by maturin), imports nothing of ours
    return mods


def _graph() -> dict[str, set[str]]:
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
