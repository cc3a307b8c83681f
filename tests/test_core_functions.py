"""Every function of the Rust core is registered once: PyO3 lets a later `add_function` of the
same name replace an earlier one silently (a slow PFP helper once replaced the packed-key
`canonical_itemsets` for every caller, 4x slower)."""

import collections
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "crates" / "clusterlab-py" / "src"


def test_no_core_function_name_is_registered_twice():
    names = collections.Counter()
    for f in sorted(SRC.rglob("*.rs")):
        names.update(re.findall(r"wrap_pyfunction!\(\s*(\w+)", f.read_text()))
    assert names, "no registrations found: has the binding crate moved?"
    assert [n for n, c in names.items() if c > 1] == []
