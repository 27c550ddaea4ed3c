"""The report's curve and tree as one PNG (matplotlib, the optional `report` extra)."""

from __future__ import annotations

from pathlib import Path

from adaexplore_mcp.export.snapshot import TreeSnapshot, speedup_text, tree_layout, verdict_color

INSTALL_HINT = "PNG reports need matplotlib: pip install 'adaexplore-mcp[report]'"


class MissingReportDependency(ImportError):
    """matplotlib is not installed; the message says how to install it."""


def _figure_class():
    """matplotlib's Figure: the object API, no pyplot global state (safe in a server thread, headless)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingReportDependency(INSTALL_HINT) from exc
    return Figure


def _max_n_locator(**kwargs):
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(**kwargs)


def _plot_curve(ax, s: TreeSnapshot) -> None:
    steps = s.steps()
    curve = [(step, best) for step, best in s.best_curve() if best is not None]
    if curve:
        last_step = max(n.step_index for n in steps)
        xs, ys = zip(*curve)
        ax.step([*xs, last_step], [*ys, ys[-1]], where="post", color="#1f77b4", lw=2, label="best so far")
    for n in steps:
        if n.correct and n.speedup is not None:
            ax.scatter(n.step_index, n.speedup, s=22, color=verdict_color(n.verdict), zorder=3)
        else:
            ax.scatter(n.step_index, 0, marker="|", s=120, color=verdict_color(n.verdict), zorder=3)
    ax.axhline(1.0, color="#888", ls="--", lw=1, label="PyTorch reference (1x)")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(_max_n_locator(integer=True))
    ax.set_ylabel("speedup (x)")
    ax.set_ylim(bottom=-0.05)
    ax.grid(alpha=0.3)
    if not curve:
        ax.text(0.5, 0.5, "no timed kernel (CPU interpreter, or none correct): verdicts only",
                transform=ax.transAxes, color="#777", ha="center", va="center")
    ax.legend(loc="upper left", fontsize=8)
    best = s.best()
    shown = "no correct kernel" if best is None else ("not timed" if best.speedup is None else speedup_text(best.speedup))
    ax.set_title(f"best speedup over steps: {shown}", fontsize=10)


def _plot_tree(ax, s: TreeSnapshot) -> None:
    placed = tree_layout(s)
    pos = {p.node.node_id: (p.x, -p.depth) for p in placed}
    best = s.best()
    for p in placed:
        if p.node.parent_id is not None:
            (x1, y1), (x2, y2) = pos[p.node.parent_id], pos[p.node.node_id]
            ax.plot([x1, x2], [y1, y2], color="#aaa", lw=1, ls="-" if p.node.kind == "small" else "--", zorder=1)
    small_tree = len(placed) <= 60
    markers = {"root": "D", "large": "s", "small": "o"}
    for p in placed:
        n, (x, y) = p.node, pos[p.node.node_id]
        is_best = best is not None and n.node_id == best.node_id
        ax.scatter(x, y, marker=markers[n.kind], s=90 if small_tree else 40, color=verdict_color(n.verdict),
                   edgecolors="black" if is_best else "white", linewidths=2.5 if is_best else 0.8, zorder=2)
        if small_tree and (n.correct or n.kind == "root"):
            label = "root" if n.kind == "root" else ("ok" if n.speedup is None else speedup_text(n.speedup))
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(0, -13), ha="center", fontsize=7)
    ax.set_axis_off()
    ax.set_title("search tree (colour: verdict; square: large step, circle: small step; black edge: best)",
                 fontsize=10)
    seen = sorted({n.verdict for n in s.steps()}, key=str)
    handles = [ax.scatter([], [], color=verdict_color(v), label=v or "none") for v in seen]
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)


def report_png(snapshot: TreeSnapshot, path: str | Path, dpi: int = 120) -> Path:
    """Write the best-speedup curve above the tree to `path` (PNG); return the path."""
    figure_class = _figure_class()
    placed = tree_layout(snapshot)
    slots = max(p.x for p in placed) + 1
    depth = max(p.depth for p in placed)
    width = min(max(9.0, 0.35 * slots), 40.0)
    tree_height = max(3.0, 0.8 * (depth + 1))
    fig = figure_class(figsize=(width, 4.0 + tree_height))
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [4.0, tree_height]})
    _plot_curve(top, snapshot)
    _plot_tree(bottom, snapshot)
    gpu = snapshot.gpu or "CPU interpreter"
    fig.suptitle(f"adaexplore-mcp search {snapshot.search_id}: {snapshot.task_name} "
                 f"({snapshot.strategy}, {len(snapshot.steps())} steps, {gpu})", fontsize=11)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, format="png", dpi=dpi)  # a Figure without pyplot draws with the Agg canvas
    return out
