"""What a kind of study cluster does (a testbed, a simulated cluster, ranks on this machine) is
said in ``experiments/kinds.py`` alone (issue 24), beside where ranks run (``cluster/``, kept by
``test_backend_choices.py``): adding a kind of cluster adds a ``StudyKind`` there and edits
nothing else. Read from the source with ``ast``, every module under ``python/clusterlab`` but
``cluster/`` and ``experiments/kinds.py``:

- a comparison of a kind's name (``kinds.KINDS``' names: testbed, simulated, loopback, mpi,
  inprocess) with something whose name says kind or cluster (``kind == "testbed"``,
  ``session.kind != "simulated"``, ``kind_of(c) in ("inprocess", "simulated")``,
  ``p.cluster.kind == ...``, ``meta.get("kind") != "testbed"``): a branch on the kind;
- ``isinstance``/``issubclass`` against a study cluster's class (``Testbed``, ``Simulated``,
  ``InProcess``, ``Local``, ``Mpirun``): a branch on the kind;
- a tuple, list, set or dict (its keys) of two or more kinds' names: a list of kinds.

``ALLOWED`` names each exception and why it is one.
"""

from __future__ import annotations

import ast
import pathlib
import re

from clusterlab.experiments import kinds
from tests.test_backend_choices import _subject, scan

ROOT = pathlib.Path(__file__).resolve().parents[1] / "python" / "clusterlab"
REGISTRY = "experiments/kinds.py"
NAMES = {k.name for k in kinds.KINDS}
CLASSES = {k.cls.__name__ for k in kinds.KINDS} | {"OnThisMachine"}
SUBJECT = re.compile(r"kind|cluster")

# (file under python/clusterlab, the expression) -> why it is not a study's branch on its cluster's kind.
ALLOWED = {
    # diagnose reads a run's record and a live job (issue 24 moved the study layer's branches; these
    # are the diagnosis layer's own, left as they were)
    ("diagnose/fidelity.py", 'cl.get("kind") != "testbed"'):
        "diagnosis of a recorded run (meta.json's cluster kind): only a testbed's hosts have the counters it reads",
    ("diagnose/observe.py", 'getattr(cluster, "kind", None) != "testbed"'):
        "diagnosis observes a testbed that is up (not a study's cluster: no topology)",
    ("diagnose/record.py", "isinstance(cluster, Testbed)"):
        "what a diagnosed job's record calls its place (testbed or local), read back by diagnose.rules",
    ("diagnose/rules.py", '(job.cluster or {}).get("kind") == "testbed"'):
        "a diagnosis rule on a recorded job's place (diagnose/record.py wrote it)",
    ("diagnose/rules.py", '(job.cluster or {}).get("kind") != "testbed"'):
        "diagnosis rules on a recorded job's place (diagnose/record.py wrote it)",
    ("diagnose/run.py", '(job.cluster or {}).get("kind") != "testbed"'):
        "diagnosis of a recorded job's place (diagnose/record.py wrote it)",
}


def _name_of(n: ast.AST) -> str:
    """``_subject``, and ``getattr(x, "kind", ...)``'s ``kind``."""
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and len(n.args) >= 2 \
            and isinstance(n.args[1], ast.Constant):
        return str(n.args[1].value)
    return _subject(n)


def branches(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """Every branch on a study cluster's kind in ``path``: (line, what, the expression)."""
    def by_class(n):
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("isinstance", "issubclass")
                and len(n.args) == 2):
            classes = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
            if any(_subject(c) in CLASSES for c in classes):
                return "choice by cluster class"
        return None
    return scan(path, NAMES, NAMES, SUBJECT, ("list of kinds", "table of kinds", "choice by kind name"),
                name_of=_name_of, other=by_class)


def _outside_registry() -> list[tuple[str, int, str, str]]:
    files = [p for p in sorted(ROOT.rglob("*.py"))
             if p.relative_to(ROOT).parts[0] != "cluster" and p.relative_to(ROOT).as_posix() != REGISTRY]
    return [(p.relative_to(ROOT).as_posix(), line, what, expr) for p in files for line, what, expr in branches(p)]


def test_no_branch_on_a_study_clusters_kind_outside_the_registry():
    found = [f"{f}:{line}: {what}: {expr}" for f, line, what, expr in _outside_registry() if (f, expr) not in ALLOWED]
    assert found == [], ("say what a kind of cluster does in experiments/kinds.py (a StudyKind's attribute or "
                         "method, reached by kinds.of(cluster)), or add the exception to ALLOWED with why it is one")


def test_every_exception_is_still_there():
    seen = {(f, expr) for f, _, _, expr in _outside_registry()}
    assert sorted(set(ALLOWED) - seen) == []


def test_every_study_cluster_class_has_its_kind():
    """Each class of ``clusterlab.cluster`` a study may hold (it names its ``kind``) has its
    ``StudyKind``, under that name, once; a name the registry does not know is None."""
    import clusterlab.cluster as cl

    classes = {c for c in (getattr(cl, n) for n in cl.__all__) if isinstance(c, type) and getattr(c, "kind", "")}
    assert {k.cls for k in kinds.KINDS} == classes
    assert sorted(k.name for k in kinds.KINDS) == sorted({c.kind for c in classes})
    assert all(kinds.by_name(k.name) is k for k in kinds.KINDS) and kinds.by_name("local") is None


def test_the_scan_finds_each_kind_of_branch(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("KINDS = ('testbed', 'simulated')\n"
                 "WORDS = {'inprocess': 1, 'loopback': 2}\n"
                 "def run(s, p, c, meta, kind):\n"
                 "    if s.kind != 'simulated' or kind_of(c) in ('inprocess', 'simulated'):\n"
                 "        pass\n"
                 "    if p.cluster.kind == 'testbed' or meta.get('kind') != 'testbed' or kind == 'mpi':\n"
                 "        pass\n"
                 "    if isinstance(c, (Local, Mpirun)) or isinstance(c, Simulated):\n"
                 "        return getattr(c, 'kind', None) == 'inprocess'\n"
                 # not branches: a transport's place, a label, a class that is no cluster
                 "    t = tcp.with_place('testbed')\n"
                 "    if place == 'testbed' or isinstance(c, dict) or p.name == 'simulated':\n"
                 "        return 'testbed'\n")
    got = [(line, what) for line, what, _ in branches(f)]
    assert (1, "list of kinds") in got and (2, "table of kinds") in got
    assert sum(1 for line, what in got if line == 4 and what == "choice by kind name") == 2
    assert sum(1 for line, what in got if line == 6 and what == "choice by kind name") == 3
    assert sum(1 for line, what in got if line == 8 and what == "choice by cluster class") == 2
    assert (9, "choice by kind name") in got
    assert not [line for line, _ in got if line >= 10], got
