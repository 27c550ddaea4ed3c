"""The import-cycle gate (.ci/import_cycles.py): what counts as a cycle, and the allow-list that only shrinks."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ci_scripts import REPO, load

ic = load("import_cycles")

FILES = {
    "__init__.py": "",
    "a.py": "from pkg import b\n",
    "b.py": "from . import c\n",
    "c.py": "import pkg.a\n",  # a -> b -> c -> a
    "d.py": "def later():\n    from pkg import e\n",  # inside a function: not at load time
    "e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import d\nimport os\n",
    "f.py": "try:\n    from .g import thing\nexcept ImportError:\n    thing = None\n",
    "g.py": "class K:\n    from pkg.f import thing\n",  # a class body runs at import: f <-> g
    "sub/__init__.py": "from .h import H\n",
    "sub/h.py": "from .. import a\nfrom ..sub import i\nH = 1\n",
    "sub/i.py": "from pkg.sub import H\n",  # a name the package defines: an import of pkg.sub itself
}


def make(tmp_path: Path, files: dict[str, str] = FILES) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_only_imports_that_run_at_load_time_close_a_cycle(tmp_path: Path) -> None:
    found = [ic.show(c) for c in ic.cycles(ic.graph(make(tmp_path)))]
    assert found == ["pkg.a -> pkg.b -> pkg.c -> pkg.a", "pkg.f -> pkg.g -> pkg.f",
                     "pkg.sub -> pkg.sub.h -> pkg.sub.i -> pkg.sub"]
    edges = ic.graph(make(tmp_path))
    assert edges["pkg.d"] == set() and edges["pkg.e"] == set()  # in a function; under TYPE_CHECKING
    with_deferred = ic.graph(make(tmp_path), deferred=True)  # for information: a function's import counts there
    assert with_deferred["pkg.d"] == {"pkg.e"} and with_deferred["pkg.e"] == set()


def test_a_new_cycle_fails_a_listed_one_passes_and_the_list_only_shrinks(tmp_path: Path) -> None:
    root = make(tmp_path)
    allowed = tmp_path / "allowed.txt"
    lines: list[str] = []
    allowed.write_text("# today's cycles\npkg.a -> pkg.b -> pkg.c -> pkg.a\npkg.f -> pkg.g -> pkg.f\n")
    assert ic.check(root, allowed, out=lines.append) == 1  # pkg.sub's cycle is new
    assert any(line.strip().startswith("NEW") and "pkg.sub ->" in line for line in lines)
    allowed.write_text(allowed.read_text() + "pkg.sub -> pkg.sub.h -> pkg.sub.i -> pkg.sub\n")
    assert ic.check(root, allowed, out=lines.append) == 0
    (root / "c.py").write_text("def later():\n    import pkg.a\n")  # a cycle broken: its entry must go
    assert ic.check(root, allowed, out=lines.append) == 1
    assert ic.check(root, allowed, prune=True, out=lines.append) == 0
    assert "pkg.a -> pkg.b" not in allowed.read_text() and "# today's cycles" in allowed.read_text()
    assert ic.check(root, allowed, out=lines.append) == 0


def test_the_package_has_no_import_cycle_beyond_the_allow_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert ic.check(REPO / "adaexplore_mcp", REPO / ".ci" / "import_cycles_allowed.txt") == 0, capsys.readouterr().out
