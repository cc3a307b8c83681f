"""`make rust-test` runs clusterlab-core's unit tests only (``--lib``: building its examples
would build the library a second time, see the Makefile). That is all of its tests only while
it has no integration tests and no doctests: this keeps it so, or says to run them."""

import re
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "crates" / "clusterlab-core"
FENCE = re.compile(r"^\s*//[/!]\s*```\s*(\S*)")


def doctests(text: str) -> int:
    """Code blocks in doc comments that rustdoc runs: a fence with no language or a Rust one.

    >>> doctests("//! ```text\\n//! a\\n//! ```\\n/// ```\\n/// f();\\n/// ```\\n")
    1
    """
    found, inside = 0, False
    for line in text.splitlines():
        m = FENCE.match(line)
        if not m:
            continue
        if not inside:
            lang = m.group(1)
            found += lang == "" or lang.split(",")[0] in ("rust", "should_panic", "no_run", "compile_fail")
        inside = not inside
    return found


def test_the_core_has_only_unit_tests():
    assert not (CORE / "tests").exists(), "clusterlab-core has integration tests: make rust-test must run them"
    with_doctests = [str(p.relative_to(CORE)) for p in sorted((CORE / "src").rglob("*.rs")) if doctests(p.read_text())]
    assert not with_doctests, f"doctests in clusterlab-core ({', '.join(with_doctests)}): make rust-test must run them"


def test_the_guard_sees_a_doctest():
    assert doctests("/// ```\n/// let x = 1;\n/// ```\n") == 1
    assert doctests("/// ```rust,no_run\n/// x\n/// ```\n") == 1
    assert doctests("/// ```text\n/// x\n/// ```\n") == 0
    assert doctests("//! ```text\n//! a\n//! ```\n/// ```\n/// f();\n/// ```\n") == 1  # a closing fence opens none
