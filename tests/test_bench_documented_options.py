"""Every option the docs name for a root ``bench/*.py`` script is one its parser knows: the
commands in README.md and docs/*.md (code blocks and inline code, synopses included) and the
reproducing commands of ``bench/results_readme.py``'s records. Nothing is run: each script's
parser is taken from its ``main`` as it parses (the work, and any root check, come after), so a
script moved onto the bench harness cannot lose a documented spelling (``--out``, ``--reps``)
without this failing. ``tests/test_docs_commands.py`` runs the commands themselves (root)."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a script path not inside another path (clusterlab/bench/storage.py is a module)
SCRIPT = re.compile(r"(?<![\w/.])bench/(\w+)\.py\b")
OPTION = re.compile(r"^(--?[A-Za-z][\w-]*)")
END = re.compile(r"`|;|&&|\|\||\s\|\s|\s#|\bthen\b|\n\n|\n(?!\s*-)")


def _code(text: str) -> list[str]:
    """Fenced blocks' lines (a ``\\`` continues a line) and inline code spans of a Markdown text."""
    out = []
    fences = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
    for m in fences.finditer(text):
        out += m.group(1).replace("\\\n", " ").splitlines()
    rest = fences.sub("", text)
    out += [m.group(1) for m in re.finditer(r"`([^`]+)`", rest)]
    return out


def documented() -> dict[str, dict[str, set[str]]]:
    """{script: {option: {where it is named}}}."""
    found: dict[str, dict[str, set[str]]] = {}

    def take(snippet: str, where: str) -> None:
        for m in SCRIPT.finditer(snippet):
            tail = snippet[m.end():]
            e = END.search(tail)
            tail = tail[:e.start()] if e else tail
            for tok in tail.replace("[", " ").replace("]", " ").split():
                o = OPTION.match(tok)
                if o:
                    found.setdefault(m.group(1) + ".py", {}).setdefault(o.group(1), set()).add(where)

    for doc in DOCS:
        for snippet in _code(doc.read_text()):
            take(snippet, str(doc.relative_to(ROOT)))
    spec = importlib.util.spec_from_file_location("bench_results_readme", ROOT / "bench" / "results_readme.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look the module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    for r in mod.RECORDS:
        take(r.command, f"bench/results_readme.py {r.name}")
    return found


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def parser_of(name: str, monkeypatch) -> argparse.ArgumentParser:
    """The parser ``bench/NAME``'s ``main`` builds, caught when it parses (nothing runs)."""
    def catch(self, *a, **kw):
        raise _Parsed(self)

    spec = importlib.util.spec_from_file_location(f"bench_{name[:-3]}", ROOT / "bench" / name)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "argv", [str(ROOT / "bench" / name)])
    # As when the script runs: its directory first on sys.path, and the names of its sibling
    # files (bench/fim.py) free of the installed modules of the same name (pyfim's fim). All of
    # it undone afterwards, or bench/fim.py would stand in for pyfim's fim in later tests.
    bench = str(ROOT / "bench")
    monkeypatch.setattr(sys, "path", [bench, *sys.path])
    shadowed = {k: sys.modules.pop(k) for k in [f.stem for f in (ROOT / "bench").glob("*.py")] if k in sys.modules}
    before = set(sys.modules)
    try:
        spec.loader.exec_module(mod)
        monkeypatch.setattr(argparse.ArgumentParser, "parse_args", catch)
        monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", catch)
        with pytest.raises(_Parsed) as e:
            mod.main()
    finally:
        for k in set(sys.modules) - before:
            if str(getattr(sys.modules[k], "__file__", "") or "").startswith(bench):
                del sys.modules[k]
        sys.modules.update(shadowed)
    return e.value.parser


DOCUMENTED = documented()
# scripts that are not argparse programs: their arguments are positional
NOT_ARGPARSE = {"comm_latency_callgrind.py"}


def test_the_docs_name_options_of_the_scripts_moved_onto_the_harness():
    # the extraction finds what it should (if these move, the test is reading the wrong text)
    for name, opt in (("seed002.py", "-o"), ("storage.py", "--out"), ("testbed.py", "--skip-updown"),
                      ("tune_auto.py", "--workload"), ("wan.py", "--plot-sweep"), ("replay_validation.py", "--reps")):
        assert opt in DOCUMENTED.get(name, {}), (name, opt, sorted(DOCUMENTED.get(name, {})))


@pytest.mark.parametrize("name", sorted(set(DOCUMENTED) - NOT_ARGPARSE))
def test_documented_options_exist(name, monkeypatch):
    assert (ROOT / "bench" / name).exists(), f"the docs name bench/{name}, which does not exist"
    known = set(parser_of(name, monkeypatch)._option_string_actions)
    missing = {o: sorted(w) for o, w in DOCUMENTED[name].items() if o not in known}
    assert not missing, f"bench/{name} no longer takes {missing}"
