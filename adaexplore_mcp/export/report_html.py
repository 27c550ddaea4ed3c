"""A search as one self-contained HTML page: summary, best-speedup curve and tree, all inline SVG.

No scripts, no stylesheets or fonts from elsewhere, no URLs: the page opens offline and can be
attached to an issue or a chat as it is. Every piece of text from the search is escaped.
"""

from __future__ import annotations

from html import escape

from adaexplore_mcp import speedups
from adaexplore_mcp.export.snapshot import (
    SnapshotNode,
    TreeSnapshot,
    speedup_text,
    tree_layout,
    verdict_color,
)

CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: left; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; border: 1px solid #ddd; padding: 4px; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 6px; margin: 0 4px 0 12px; }
.muted { color: #777; } tr.best td { background: #eaf7ee; font-weight: 600; }
svg text { font: 11px system-ui, sans-serif; } svg.tree text { font-size: 10px; }
"""


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


CPU_HONEST = "CPU interpreter: correctness only, no speedups; all passing kernels rank equal"


def untimed(s: TreeSnapshot) -> bool:
    """Correct kernels but none timed (the CPU interpreter): then no kernel is faster than another, and the
    report must not crown a "best speedup"; the highlighted node is only the first correct one."""
    correct = [n for n in s.steps() if n.correct]
    return bool(correct) and all(n.speedup is None for n in correct)


def _summary(s: TreeSnapshot) -> str:
    best = s.best()
    steps = s.steps()
    if best is None:
        ranking = ("best speedup", "no correct kernel")
    elif untimed(s):
        ranking = ("ranking", f"{CPU_HONEST} (first correct: node {escape(best.node_id)}, step {best.step_index})")
    else:
        ranking = ("best speedup", f"{escape(speedups.text(best.speedups, speedup_text(best.speedup)))} (node "
                   f"{escape(best.node_id)}, step {best.step_index})")
    rows = [
        ("task", escape(s.task_name)),
        ("search", escape(s.search_id)),
        ("strategy", escape(s.strategy)),
        ("GPU", escape(s.gpu or "none (CPU interpreter: correctness only, no timing)")),
        ("steps", f"{len(steps)} of {s.budget}" if s.budget else str(len(steps))),
        ranking,
        ("correct", f"{sum(n.correct for n in steps)} of {len(steps)}"),
        ("steps by kind", ", ".join(f"{k}: {v}" for k, v in s.kind_counts().items()) or "-"),
    ]
    verdicts = "".join(
        f'<tr><td><span class="swatch" style="background:{verdict_color(v)}"></span>{escape(v)}</td>'
        f'<td class="num">{c}</td></tr>'
        for v, c in s.verdict_counts().items()
    )
    table = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return (
        f'<table class="summary">{table}</table>'
        f'<h2>Verdicts</h2><table class="verdicts"><tr><th>verdict</th><th>nodes</th></tr>{verdicts}</table>'
    )


def _curve_svg(s: TreeSnapshot, width: int = 720, height: int = 260) -> str:
    """Best speedup so far (line) and each correct step's speedup (dots) over steps; failures as ticks."""
    steps = s.steps()
    left, right, top, bottom = 52, 16, 16, 40
    pw, ph = width - left - right, height - top - bottom
    out = [f'<svg class="curve" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'role="img" aria-label="best speedup over steps">']
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fafafa" stroke="#ccc"/>')
    if not steps:
        out.append(f'<text x="{left + 10}" y="{top + 20}">no steps yet</text></svg>')
        return "".join(out)
    n = max(n.step_index for n in steps)
    speeds = [x.speedup for x in steps if x.correct and x.speedup is not None]
    ymax = max([1.0, *speeds]) * 1.1

    def px(step: float) -> float:
        return left + (step / max(n, 1)) * pw

    def py(value: float) -> float:
        return top + ph - (value / ymax) * ph

    tick = next(t for t in (0.25, 0.5, 1, 2, 5, 10, 20, 50) if ymax / t <= 6)
    for i in range(int(ymax / tick) + 1):  # y grid and labels at round values
        v = i * tick
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}x</text>')
    for i in range(0, n + 1, max(1, round(n / 10))):
        out.append(f'<text x="{px(i):.1f}" y="{top + ph + 16}" text-anchor="middle">{i}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">step</text>')
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{py(1):.1f}" y2="{py(1):.1f}" '
               'stroke="#888" stroke-dasharray="4 3"><title>1x: the PyTorch reference</title></line>')
    if speeds:
        pts, last = [], None
        for step, best in s.best_curve():
            if best is None:
                continue
            if last is not None:
                pts.append(f"{px(step):.1f},{py(last):.1f}")  # step shape: flat until improved
            pts.append(f"{px(step):.1f},{py(best):.1f}")
            last = best
        pts.append(f"{px(n):.1f},{py(last):.1f}")
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
    else:
        note = CPU_HONEST if untimed(s) else "CPU interpreter or no correct kernel: verdicts only"
        out.append(f'<text x="{left + 10}" y="{top + 20}" class="muted">no timed kernel ({note})</text>')
    for x in steps:
        tip = escape(f"step {x.step_index}, node {x.node_id}, {x.kind}, {x.verdict}, {speedup_text(x.speedup)}")
        if x.correct and x.speedup is not None:
            out.append(f'<circle cx="{px(x.step_index):.1f}" cy="{py(x.speedup):.1f}" r="3.5" '
                       f'fill="{verdict_color(x.verdict)}"><title>{tip}</title></circle>')
        else:  # failed or untimed: a tick on the axis, coloured by verdict
            y0 = top + ph
            out.append(f'<line x1="{px(x.step_index):.1f}" x2="{px(x.step_index):.1f}" y1="{y0 - 8}" y2="{y0}" '
                       f'stroke="{verdict_color(x.verdict)}" stroke-width="2"><title>{tip}</title></line>')
    out.append("</svg>")
    return "".join(out)


def _tree_svg(s: TreeSnapshot) -> str:
    """Top-down tree; colour = verdict, square = large step, circle = small step, diamond = root."""
    placed = tree_layout(s)
    dx, dy, margin, r = 46, 58, 24, 8
    slots = max(p.x for p in placed) + 1
    depth = max(p.depth for p in placed)
    width, height = int(slots * dx + 2 * margin), int(depth * dy + 2 * margin + 16)
    pos = {p.node.node_id: (margin + p.x * dx + dx / 2, margin + p.depth * dy) for p in placed}
    best = s.best()
    out = [f'<svg class="tree" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'role="img" aria-label="search tree">']
    for p in placed:
        if p.node.parent_id is not None:
            (x1, y1), (x2, y2) = pos[p.node.parent_id], pos[p.node.node_id]
            dash = "" if p.node.kind == "small" else ' stroke-dasharray="5 3"'
            out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#aaa"{dash}/>')
    for p in placed:
        node, (x, y) = p.node, pos[p.node.node_id]
        color = verdict_color(node.verdict)
        tip = escape(
            f"node {node.node_id} (step {node.step_index}, {node.kind})\nverdict: {node.verdict or 'root'}\n"
            f"speedup: {speedups.text(node.speedups, speedup_text(node.speedup))}\n"
            f"reward: {node.reward:.3f}  visits: {node.visits}"
            + (f"\n{node.note}" if node.note else "")
        )
        stroke = ' stroke="#000" stroke-width="3"' if best and node.node_id == best.node_id else ' stroke="#fff"'
        attrs = f'fill="{color}"{stroke} data-node="{escape(node.node_id)}" data-verdict="{escape(node.verdict or "root")}"'
        if node.kind == "root":
            shape = f'<polygon points="{x},{y - r - 2} {x + r + 2},{y} {x},{y + r + 2} {x - r - 2},{y}" {attrs}>'
        elif node.kind == "large":
            shape = f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}" {attrs}>'
        else:
            shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" {attrs}>'
        tag = shape.split(" ", 1)[0][1:]
        out.append(f"{shape}<title>{tip}</title></{tag}>")
        if node.kind == "root":
            label = "root"
        elif node.correct:
            label = "ok" if node.speedup is None else speedup_text(node.speedup)
        else:
            label = str(node.step_index)
        out.append(f'<text x="{x:.1f}" y="{y + r + 13:.1f}" text-anchor="middle">{escape(str(label))}</text>')
    out.append("</svg>")
    return "".join(out)


def _legend(s: TreeSnapshot) -> str:
    items = ["passed", "mismatch", "compile_error", "runtime_error", "timeout", "crashed", "rejected"]
    swatches = "".join(f'<span class="swatch" style="background:{verdict_color(v)}"></span>{v}' for v in items)
    best = ("the first correct kernel (untimed: all passing kernels rank equal)" if untimed(s)
            else "the best kernel")
    return (f'<p class="muted">{swatches}<br>diamond: root (the PyTorch reference); square: large step '
            "(a new kernel; dashed edge); circle: small step (an edit of its parent). Label: speedup of a "
            f"correct kernel (ok: correct, not timed), else the step number. Black outline: {best}. "
            "Hover for details.</p>")


def _yardstick_cells(n: SnapshotNode) -> str:
    """vs TF32, vs torch.compile and % of roofline ('-' where not measured)."""
    y = n.speedups
    cells = [speedup_text(y.tf32 if y else None), speedup_text(y.compiled if y else None),
             "-" if y is None or y.pct_roofline is None else f"{y.pct_roofline:.0f}%"]
    return "".join(f'<td class="num">{c}</td>' for c in cells)


def _node_table(s: TreeSnapshot) -> str:
    best = s.best()
    head = ("<tr><th>step</th><th>node</th><th>parent</th><th>kind</th><th>verdict</th><th>speedup</th>"
            "<th>vs TF32</th><th>vs torch.compile</th><th>% roofline</th><th>reward</th><th>visits</th>"
            "<th>note</th></tr>")
    rows = []
    for n in sorted(s.nodes, key=lambda n: n.step_index):
        cls = ' class="best"' if best and n.node_id == best.node_id else ""
        verdict = n.verdict or "root"
        rows.append(
            f'<tr{cls} id="node-{escape(n.node_id)}"><td class="num">{n.step_index}</td><td>{escape(n.node_id)}</td>'
            f"<td>{escape(n.parent_id or '-')}</td><td>{n.kind}</td>"
            f'<td><span class="swatch" style="background:{verdict_color(n.verdict)}"></span>{escape(verdict)}</td>'
            f'<td class="num">{speedup_text(n.speedup)}</td>{_yardstick_cells(n)}<td class="num">{_fmt(n.reward, 3)}</td>'
            f'<td class="num">{n.visits}</td><td>{escape(n.note)}</td></tr>'
        )
    return f'<table class="nodes">{head}{"".join(rows)}</table>'


def report_html(snapshot: TreeSnapshot) -> str:
    """The whole report as one HTML document (a string)."""
    s = snapshot
    title = f"adaexplore-mcp search {s.search_id}: {s.task_name}"
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        '<p class="muted">AdaExplore tree search: every step adds one node, a kernel proposed by the assistant '
        "and judged by the server. Speedup is against the PyTorch reference in strict fp32.</p>",
        "<h2>Summary</h2>", _summary(s),
        "<h2>Best speedup over steps</h2>", _curve_svg(s),
        "<h2>Search tree</h2>", _legend(s), f'<div class="scroll">{_tree_svg(s)}</div>',
        "<h2>Nodes</h2>", _node_table(s),
        "</body></html>",
    ])
