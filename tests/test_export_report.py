"""Reports of a search: a self-contained HTML page and a PNG, both showing the curve and the tree."""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser

import pytest

from adaexplore_mcp.export import MissingReportDependency, TreeSnapshot, report_html, report_png

VERDICTS = ["passed", "mismatch", "passed", "compile_error", "passed", "runtime_error", "passed", "timeout",
            "rejected", "passed", "crashed", "passed"]


def _snapshot(timed: bool = True) -> TreeSnapshot:
    nodes = [{"node_id": "n0", "parent_id": None, "kind": "root", "step_index": 0, "visits": 12, "reward": 0.6}]
    for i, verdict in enumerate(VERDICTS, start=1):
        parent = "n0" if i <= 3 else f"n{(i - 1) // 2}"
        kind = "large" if parent == "n0" or i % 5 == 0 else "small"
        speedup = (0.8 + 0.25 * i) if (verdict == "passed" and timed) else None
        nodes.append({"node_id": f"n{i}", "parent_id": parent, "kind": kind, "verdict": verdict,
                      "speedup": speedup, "reward": 0.4 if verdict == "passed" else 0.05, "visits": 1,
                      "step_index": i, "note": f"tile <{i}> & \"fuse\""})
    return TreeSnapshot(search_id="s-42", task_name="softmax_rows", strategy="adaexplore", budget=20,
                        nodes=nodes, gpu="NVIDIA H200" if timed else None)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.mismatched: list[str] = []

    VOID = {"meta", "br", "rect", "circle", "line", "polyline", "polygon", "link", "img"}

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_endtag(self, tag):
        if tag in self.VOID and (not self.stack or self.stack[-1] != tag):
            return
        if not self.stack or self.stack[-1] != tag:
            self.mismatched.append(tag)
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Collector:
    parser = _Collector()
    parser.feed(page)
    parser.close()
    return parser


def test_the_html_report_parses_with_balanced_tags_and_shows_every_node():
    page = report_html(_snapshot())
    parsed = _parse(page)
    assert not parsed.mismatched and parsed.stack == [], (parsed.mismatched, parsed.stack)
    assert page.startswith("<!DOCTYPE html>")
    assert parsed.tags.count("svg") == 2  # the curve and the tree
    node_ids = {v for k, v in parsed.attrs if k == "data-node"}
    assert node_ids == {f"n{i}" for i in range(len(VERDICTS) + 1)}
    for i in range(len(VERDICTS) + 1):
        assert f'id="node-n{i}"' in page
    text = " ".join(parsed.text)
    assert "tile <3> & \"fuse\"" in text  # notes are escaped in the source, intact as text
    assert "<3>" not in page


def test_the_html_summary_has_best_speedup_steps_and_verdict_counts():
    snapshot = _snapshot()
    page = report_html(snapshot)
    best = snapshot.best()
    assert best.node_id == "n12" and best.speedup == pytest.approx(0.8 + 0.25 * 12)
    assert f"{best.speedup:.2f}x" in page
    assert "12 of 20" in page  # steps of budget
    assert re.search(r"passed</td><td class=\"num\">6<", page)
    assert re.search(r"compile_error</td><td class=\"num\">1<", page)
    assert 'class="best"' in page and "polyline" in page


def test_the_html_report_loads_nothing_from_elsewhere():
    page = report_html(_snapshot())
    parsed = _parse(page)
    assert "script" not in parsed.tags and "link" not in parsed.tags and "img" not in parsed.tags
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/|url\(|@import", page, re.I)
    for key, value in parsed.attrs:
        assert key not in ("src", "href"), (key, value)


def test_an_untimed_search_says_so_instead_of_drawing_a_curve():
    page = report_html(_snapshot(timed=False))
    assert "no timed kernel" in page and "polyline" not in page
    assert "CPU interpreter" in page


def test_a_search_with_only_the_root_still_renders():
    snapshot = TreeSnapshot(search_id="s", task_name="t", budget=5,
                            nodes=[{"node_id": 1, "parent_id": None, "kind": "root"}])
    page = report_html(snapshot)
    assert "no steps yet" in page and "no correct kernel" in page
    assert not _parse(page).mismatched


def test_a_snapshot_must_be_a_tree():
    with pytest.raises(ValueError, match="unknown parent"):
        TreeSnapshot(search_id="s", task_name="t", nodes=[
            {"node_id": "a", "parent_id": None, "kind": "root"},
            {"node_id": "b", "parent_id": "zz", "kind": "large", "verdict": "passed", "step_index": 1}])
    with pytest.raises(ValueError, match="exactly one root"):
        TreeSnapshot(search_id="s", task_name="t", nodes=[])


def test_best_curve_tracks_the_running_best_of_correct_timed_nodes():
    curve = _snapshot().best_curve()
    assert [step for step, _ in curve] == list(range(1, len(VERDICTS) + 1))
    assert curve[0] == (1, pytest.approx(1.05))
    assert curve[1] == (2, pytest.approx(1.05))  # a mismatch does not move it
    assert curve[-1] == (12, pytest.approx(0.8 + 0.25 * 12))


def test_the_png_report_is_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = report_png(_snapshot(), tmp_path / "report.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    untimed = report_png(_snapshot(timed=False), tmp_path / "untimed.png")
    assert untimed.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_the_png_report_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib...` fail
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(MissingReportDependency, match=r"pip install 'adaexplore-mcp\[report\]'"):
        report_png(_snapshot(), tmp_path / "report.png")
