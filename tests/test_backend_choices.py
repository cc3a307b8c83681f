"""Where ranks run is chosen in ``clusterlab.cluster`` alone (issue 24): outside it no module
lists the backends, meshes or launchers, or branches on one, so a new kind of cluster is added in
``cluster/`` only. Read from the source with ``ast``, every module under ``python/clusterlab``
but ``cluster/``:

- a tuple, list, set or dict (its keys) holding two or more of ``WORDS``: a backend list;
- a comparison of one of ``WORDS`` with something whose name says backend, mesh, engine,
  launcher, kind, started_by, how or name (``engine == "mpi"``, ``c.kind in ("loopback", "mpi")``,
  ``stats.get("backend") == "mpi"``): a launcher choice;
- ``x if ... else y`` giving one of two of them: a launcher choice.

A field that merely shares a word (a study's ``tcp`` settings axis, ``k == "tcp"``) names nothing
of the sort and is not matched. ``ALLOWED`` names each exception and why it is one.
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1] / "python" / "clusterlab"

# The names of backends, meshes and launchers (``cluster.api.BACKENDS``, ``MESHES``, ``LAUNCHERS``).
WORDS = {"tcp", "mpi", "inproc", "world", "mpiexec"}
LIST_WORDS = WORDS | {"auto", "local"}  # in a list beside another: the commands' --backend / --launcher values
SUBJECT = re.compile(r"backend|mesh|engine|launcher|started_by|kind|^how$|^name$")

# (file under python/clusterlab, the expression) -> why it is not a choice of where ranks run.
ALLOWED = {
    ("rendezvous/contract.py", '("tcp", "mpi")'):
        "MESHES: the launcher<->rank contract's vocabulary, in the bottom package both sides import "
        "(cluster.api re-exports it; comm may not import cluster)",
    ("rendezvous/contract.py", '"mpi" if how == "mpiexec" else "tcp"'):
        "the rank reads the mesh its launcher named; unset, the contract's default for who started it",
    ("rendezvous/contract.py", 'how == "mpiexec"'): "the same default",
    ("rendezvous/contract.py", 'how != "mpiexec"'):
        "refuses an environment that names MPI without mpiexec (a bad contract, not a choice)",
    ("comm/world.py", '{"tcp": _join_tcp, "mpi": _join_mpi}'):
        "the rank side: how to join each mesh of contract.MESHES once the launcher chose one",
    ("comm/world.py", 'contract.started_by() == "mpiexec"'):
        "the rank side: was this process started by mpiexec (the contract says who started it)",
    ("npb/official.py", 'cluster.name == "mpi"'):
        "a user-facing label for the record (npb-mpi, or npb-mpi on testbed NAME)",
    ("report/program.py", 'cl.get("mesh") == "mpi"'):
        "a report's sentence about a recorded run's mesh (meta.json), not how ranks run",
    ("diagnose/dilation.py", 'backend != "tcp"'):
        "refuses --auto-dilation for any mesh but the TCP one its replay uses (a new mesh is refused "
        "too, no edit needed)",
}


def _strings(nodes) -> set[str]:
    out = set()
    for n in nodes:
        if isinstance(n, ast.Starred):
            n = n.value
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
            out |= _strings(n.elts)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.add(n.value)
    return out


def _subject(n: ast.AST) -> str:
    """The name an operand goes by: ``engine``, ``c.kind``'s ``kind``, ``s.get("mesh")``'s
    ``mesh``, ``contract.started_by()``'s ``started_by``; "" for a constant or a collection."""
    if isinstance(n, ast.Name):
        return n.id
    if isinstance(n, ast.Attribute):
        return n.attr
    if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
        return str(n.slice.value)
    if isinstance(n, ast.Call):
        if isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args \
                and isinstance(n.args[0], ast.Constant):
            return str(n.args[0].value)
        return _subject(n.func)
    return ""


def scan(path: pathlib.Path, list_words: set[str], words: set[str], subject: re.Pattern, labels: tuple[str, str, str],
         name_of=_subject, other=None) -> list[tuple[int, str, str]]:
    """(line, what, the expression) of every collection holding two or more of ``list_words``
    (``labels[0]``, a dict's keys: ``labels[1]``), every comparison of one of ``words`` with
    something ``subject`` names (``labels[2]``), and whatever ``other(node)`` calls something."""
    text = path.read_text()
    out = []
    for n in ast.walk(ast.parse(text, str(path))):
        what = None
        if isinstance(n, (ast.Tuple, ast.List, ast.Set)) and len(_strings([n]) & list_words) >= 2:
            what = labels[0]
        elif isinstance(n, ast.Dict) and len(_strings([k for k in n.keys if k is not None]) & list_words) >= 2:
            what = labels[1]
        elif isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if _strings(sides) & words and any(subject.search(name_of(s)) for s in sides if name_of(s)):
                what = labels[2]
        elif other is not None:
            what = other(n)
        if what:
            out.append((n.lineno, what, ast.get_source_segment(text, n)))
    return out


def choices(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """Every backend list or launcher choice in ``path``: (line, what, the expression)."""
    def chosen(n):
        return "backend chosen" if isinstance(n, ast.IfExp) and len(_strings([n.body, n.orelse]) & LIST_WORDS) >= 2 \
            else None
    return scan(path, LIST_WORDS, WORDS, SUBJECT, ("backend list", "backend table", "choice by backend name"),
                other=chosen)


def _outside_cluster() -> list[tuple[str, int, str, str]]:
    return [(p.relative_to(ROOT).as_posix(), line, what, expr)
            for p in sorted(ROOT.rglob("*.py")) if p.relative_to(ROOT).parts[0] != "cluster"
            for line, what, expr in choices(p)]


def test_no_backend_list_or_launcher_choice_outside_the_cluster_layer():
    found = [f"{f}:{line}: {what}: {expr}" for f, line, what, expr in _outside_cluster() if (f, expr) not in ALLOWED]
    assert found == [], ("choose where ranks run in clusterlab.cluster (cluster.api.from_options, rank_engine, a "
                         "Cluster's own attributes), or add the exception to ALLOWED with why it is one")


def test_every_exception_is_still_there():
    """An exception whose code is gone leaves the allowance to the next, different code."""
    seen = {(f, expr) for f, _, _, expr in _outside_cluster()}
    assert sorted(set(ALLOWED) - seen) == []


def test_the_scan_finds_each_kind_of_choice(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("BACKENDS = ('auto', 'tcp', 'mpi')\n"
                 "JOIN = {'tcp': 1, 'mpi': 2}\n"
                 "def run(tb, engine, stats, c, params):\n"
                 "    ranks = Testbed(tb, mesh='mpi' if engine == 'mpi' else 'tcp')\n"
                 "    if stats.get('backend') == 'mpi' or c.kind in ('loopback', 'mpi'):\n"
                 "        pass\n"
                 "    if engine not in (*ENGINES, 'mpi') or params['engine'] != 'tcp':\n"
                 "        pass\n"
                 # not choices: a study's `tcp` settings axis, a row's field, a label
                 "    k = 'tcp'\n"
                 "    if k == 'tcp' or 'tcp' in params:\n"
                 "        return params['tcp'], ('mpi', 'rust')\n")
    got = [(line, what) for line, what, _ in choices(f)]
    assert got.count((1, "backend list")) == 1 and (2, "backend table") in got
    assert (4, "backend chosen") in got and (4, "choice by backend name") in got
    assert sum(1 for line, what in got if line == 5 and what == "choice by backend name") == 2
    assert sum(1 for line, what in got if line == 7 and what == "choice by backend name") == 2
    assert not [line for line, _ in got if line >= 9], got
