"""Every command and snippet in README.md and docs/*.md runs as written, as a new user would
run it from a clone after ``make setup`` (the venv not activated), and every CLI command's
``--help`` shows examples.

What is run:

* shell code blocks (```sh, ```bash, ```console, or unlabelled/indented blocks whose lines
  start with a command) line by line (``\\`` continues a line); lines with synopsis marks
  (``[--opt]``, ``a|b``, ``...``, ``FILE``-style placeholders) are synopses, not run (inline
  code in prose names commands, it is not run either);
* Python blocks (```python) as a script each; a block whose first line is ``# file: NAME``
  is saved as NAME (a later command runs it) instead.

Where: a scratch copy of the clone (its top-level entries linked, so files the commands write
land in the scratch directory) with ``../shared`` beside it; the commands of one Markdown file
run in order in one directory, so a file made by one command is there for the next. A line
starting with ``clusterlab`` means ``.venv/bin/clusterlab`` (README's convention); everything
else runs as typed (``python`` is not the venv's: the docs say ``.venv/bin/python``).

Markers (HTML comments, invisible on GitHub; kept rare), on the line before a block or a
paragraph:

* ``<!-- docs-test: root -->``: needs root (skipped with the reason otherwise);
* ``<!-- docs-test: skip REASON -->``: not run, with the reason (e.g. it installs into the
  user's environment, or removes every testbed on the machine);
* ``<!-- docs-test: setup COMMAND -->``: COMMAND runs first (a small stand-in for the user's
  own data); ``<!-- docs-test: instead COMMAND -->``: COMMAND runs in place of a long one;
* ``<!-- docs-test: rename NAME -->``: the testbed name NAME is replaced by a fresh one (a
  fixed name could be another user's testbed).
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tests.conftest import SHARED_DATA, is_root

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
COMMAND_START = ("clusterlab ", ".venv/", "make ", "pip ", "export ", "source ", "python", "cd ", "mkdir ")
SYNOPSIS = re.compile(r"\[-|\[[A-Za-z]|\.\.\.|\b[A-Z][A-Z_]{2,}\b|<[a-z]|\w\|\w|\s\|\s*$|\{[a-z]")
MARK = re.compile(r"<!--\s*docs-test:\s*(\w+)\s*(.*?)\s*-->")
TIMEOUT = 300


@dataclasses.dataclass
class Snippet:
    doc: str
    line: int
    kind: str  # "sh" or "python"
    text: str
    marks: list

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _marks_before(lines: list[str], i: int) -> list[tuple[str, str]]:
    out = []
    j = i - 1
    while j >= 0 and (lines[j].strip() == "" or MARK.search(lines[j])):
        m = MARK.search(lines[j])
        if m:
            out.append((m.group(1), m.group(2)))
        j -= 1
        if lines[j + 1].strip() == "" and out:
            break
    return out


def _commands(text: str) -> list[str]:
    """Shell lines of a block: continuations joined, comments and prompts dropped."""
    out, cur = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.startswith("$ "):
            line = line[2:]
        if cur:
            line = cur + " " + line.strip()
            cur = ""
        if line.endswith("\\"):
            cur = line[:-1].rstrip()
            continue
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        out.append(s)
    return out


def _strip_comment(cmd: str) -> str:
    """The command without a trailing ``# comment`` (outside quotes)."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=False)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        list(lex)
    except ValueError:
        return cmd
    q = None
    for i, ch in enumerate(cmd):
        if q:
            q = None if ch == q else q
        elif ch in "'\"":
            q = ch
        elif ch == "#" and (i == 0 or cmd[i - 1].isspace()):
            return cmd[:i].rstrip()
    return cmd


def is_command(line: str) -> bool:
    return line.startswith(COMMAND_START) and not SYNOPSIS.search(_strip_comment(line))


def extract(path: Path) -> list[Snippet]:
    lines = path.read_text().splitlines()
    doc = str(path.relative_to(ROOT))
    out: list[Snippet] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(\s*)```(\w*)\s*$", line)
        if fence:
            lang = fence.group(2)
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            body = "\n".join(lines[i + 1:j])
            marks = _marks_before(lines, i)
            if lang == "python":
                out.append(Snippet(doc, i + 1, "python", body, marks))
            elif lang in ("sh", "bash", "shell", "console", ""):
                cmds = [_strip_comment(c) for c in _commands(body)]
                if cmds and all(is_command(c) or c.startswith(COMMAND_START) for c in cmds):
                    out.append(Snippet(doc, i + 1, "sh", "\n".join(c for c in cmds if is_command(c)), marks))
            i = j + 1
            continue
        if line.startswith("    ") and (i == 0 or lines[i - 1].strip() == "") and line.strip().startswith(COMMAND_START):
            j = i
            while j < len(lines) and lines[j].startswith("    "):
                j += 1
            cmds = [_strip_comment(c) for c in _commands("\n".join(x[4:] for x in lines[i:j]))]
            out.append(Snippet(doc, i + 1, "sh", "\n".join(c for c in cmds if is_command(c)), _marks_before(lines, i)))
            i = j
            continue
        i += 1
    return [s for s in out if s.text.strip()]


ALL = [s for p in DOCS for s in extract(p)]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A scratch clone: every top-level entry of the checkout linked, ../shared beside it."""
    base = tmp_path_factory.mktemp("docs")
    c = base / "clone"
    c.mkdir()
    for e in ROOT.iterdir():
        if e.name in (".git", "runs", "target") or e.name.endswith((".dat", ".parquet", ".json", ".txt", ".csv")):
            continue
        (c / e.name).symlink_to(e)
    if SHARED_DATA.exists():
        (base / "shared").mkdir()
        (base / "shared" / "data").symlink_to(SHARED_DATA)
    return c


def _env() -> dict:
    env = dict(os.environ)
    parts = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != VENV_BIN.resolve()]
    env["PATH"] = os.pathsep.join(parts)
    env.pop("VIRTUAL_ENV", None)
    env.pop("CLUSTERLAB_COSTMODEL", None)
    return env


def _sh(cmd: str, cwd: Path) -> subprocess.CompletedProcess:
    script = f'set -e -o pipefail\nclusterlab() {{ "{VENV_BIN}/clusterlab" "$@"; }}\n{cmd}\n'
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT)


def _run(snip: Snippet, cwd: Path) -> None:
    marks = dict(snip.marks)
    if "skip" in marks:
        pytest.skip(f"{snip.id}: {marks['skip']}")
    if "root" in marks and not is_root:
        pytest.skip(f"{snip.id}: needs root (network namespaces)")
    for kind, arg in snip.marks:
        if kind == "setup":
            r = _sh(arg, cwd)
            assert r.returncode == 0, f"{snip.id}: set-up {arg!r} failed:\n{r.stderr[-2000:]}"
    if snip.kind == "python":
        first = snip.text.lstrip().splitlines()[0] if snip.text.strip() else ""
        m = re.match(r"#\s*file:\s*(\S+)", first)
        if m:
            (cwd / m.group(1)).write_text(snip.text + "\n")
            return
        (cwd / "snippet.py").write_text(snip.text + "\n")
        r = subprocess.run([str(VENV_BIN / "python"), "snippet.py"], cwd=cwd, env=_env(), capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, f"{snip.id}: the Python snippet failed:\n{snip.text}\n{r.stderr[-3000:]}"
        return
    commands = [marks["instead"]] if "instead" in marks else snip.text.splitlines()
    if "rename" in marks:  # a fixed testbed name in the docs: a fresh one here (others may use it)
        fresh = "d" + secrets.token_hex(3)
        commands = [re.sub(rf"\b{re.escape(marks['rename'])}\b", fresh, c) for c in commands]
    try:
        for cmd in commands:
            r = _sh(cmd, cwd)
            assert r.returncode == 0, f"{snip.id}: `{cmd}` exited {r.returncode}:\n{r.stderr[-3000:]}"
    finally:
        if "rename" in marks:  # a block that failed before its `testbed down` left the testbed up
            subprocess.run([str(VENV_BIN / "clusterlab"), "testbed", "clean", fresh], capture_output=True,
                           timeout=120, env=_env())


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("doc", [str(p.relative_to(ROOT)) for p in DOCS])
def test_documented_commands_run(doc, clone, tmp_path):
    """Each Markdown file's commands and snippets, in order, in one scratch directory."""
    work = tmp_path / "clone"
    work.mkdir()
    for e in clone.iterdir():
        (work / e.name).symlink_to(os.readlink(e))
    if (clone.parent / "shared").exists():
        (tmp_path / "shared").symlink_to(clone.parent / "shared")
    snippets = [s for s in ALL if s.doc == doc]
    if not snippets:
        pytest.skip(f"{doc} documents no command")
    failures, skipped = [], []
    has_shared = (clone.parent / "shared").exists()
    for s in snippets:
        if "../shared/" in s.text and not has_shared:  # as tests/conftest.py: data sits beside the checkout
            skipped.append(f"{s.doc}:{s.line}: needs ../shared beside the checkout")
            continue
        try:
            _run(s, work)
        except pytest.skip.Exception as e:
            skipped.append(str(e))
        except (AssertionError, subprocess.TimeoutExpired) as e:
            failures.append(str(e))
    assert not failures, "\n\n".join(failures)


def test_extraction_finds_the_documented_commands():
    """The extractor sees the README's quick start and the docs' blocks, and leaves synopses alone."""
    texts = "\n".join(s.text for s in ALL)
    assert "clusterlab gen T10I4D100K --items 1000 -o t10.dat" in texts
    assert any(s.kind == "python" for s in ALL)
    assert not is_command("clusterlab stats FILE [--json]")
    assert not is_command("clusterlab bench pingpong [--sizes 1:4M] [--json]")
    assert is_command("clusterlab bench collective --op bcast -n 8 --sizes 1:1M")
    assert _strip_comment("clusterlab gen x -o t.dat   # a comment") == "clusterlab gen x -o t.dat"
    assert len(ALL) > 20


# --- every command's --help has examples ---------------------------------------------------------
# Commands whose --help may lack examples (none: every command has them).
LACKING: dict[str, str] = {}


def _all_commands():
    from clusterlab.cli import cli

    out = []

    def walk(cmd, path):
        out.append((" ".join(path), cmd))
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])

    walk(cli, [])
    return out


@pytest.mark.parametrize("name", [n for n, _ in _all_commands()])
def test_every_command_help_has_examples(name):
    if name in LACKING:
        pytest.xfail(f"`clusterlab {name} --help` has no examples yet: {LACKING[name]}")
    from click.testing import CliRunner

    from clusterlab.cli import cli

    r = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert r.exit_code == 0, r.output
    assert re.search(r"^\s*(Examples?|Quick start):", r.output, re.M), f"clusterlab {name} --help has no examples"
    assert re.search(r"^\s+clusterlab ", r.output, re.M), f"clusterlab {name} --help shows no command line"
