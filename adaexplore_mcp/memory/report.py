"""A summary of the memory for the Adapt loop: failures, clusters, rules, and what the seed misses.

    python -m adaexplore_mcp.memory.report [--home DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..store import Store
from . import clusters as clusters_mod
from . import rules as rules_mod
from .types import MemoryReport


def build_report(store: Store, top: int = 10) -> MemoryReport:
    by_cat = {r["category"]: int(r["n"]) for r in store.read(
        "SELECT category, COUNT(*) AS n FROM failures GROUP BY category ORDER BY category")}
    all_clusters = clusters_mod.list_clusters(store, ripe_only=False, limit=10_000)
    rules = rules_mod.load_all(store, clusters_mod.cluster_id)
    seed_sigs = {s for r in rules if r.provenance.origin == "seed" and r.status == "active"
                 for s in r.provenance.signatures}
    failure_sigs = {c.signature for c in all_clusters}
    by_origin: dict[str, int] = {}
    for r in rules:
        by_origin[r.provenance.origin] = by_origin.get(r.provenance.origin, 0) + 1
    return MemoryReport(
        failures=sum(by_cat.values()),
        failures_by_category=by_cat,
        clusters=len(all_clusters),
        ripe_clusters=sum(c.ripe for c in all_clusters),
        rules_active=sum(r.status == "active" for r in rules),
        rules_retired=sum(r.status == "retired" for r in rules),
        rules_shown=sum(r.shown for r in rules),
        rules_by_origin=by_origin,
        top_clusters=all_clusters[:top],
        uncovered_by_seed=[c for c in all_clusters if c.signature not in seed_sigs][:top],
        seed_rules_never_hit=sorted(r.provenance.seed_key or r.rule_id for r in rules
                                    if r.provenance.origin == "seed"
                                    and not failure_sigs.intersection(r.provenance.signatures)),
    )


def format_report(rep: MemoryReport) -> str:
    lines = [
        f"failures: {rep.failures} {rep.failures_by_category}",
        f"clusters: {rep.clusters} (ripe {rep.ripe_clusters})",
        f"rules: {rep.rules_active} active, {rep.rules_retired} retired, {rep.rules_shown} shown; "
        f"by origin {rep.rules_by_origin}",
        "top clusters:",
        *[f"  {c.count:5d}  {len(c.tasks):3d} tasks  {c.cluster_id}  {c.signature}"
          + (f"  [{', '.join(c.rule_ids)}]" if c.rule_ids else "  [no rule]") for c in rep.top_clusters],
        "not covered by any seed rule:",
        *[f"  {c.count:5d}  {c.cluster_id}  {c.signature}" for c in rep.uncovered_by_seed],
        f"seed rules never hit: {len(rep.seed_rules_never_hit)}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=None, help="data directory (default: $ADAEXPLORE_HOME)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    from ..config import Settings
    from .service import MemoryService

    settings = Settings.from_env()
    db = (args.home / settings.db_path.name) if args.home else settings.db_path
    if not db.exists():
        print(f"no database at {db}", file=sys.stderr)
        return 1
    service = MemoryService(Store(db), load_seeds=False)
    rep = service.report(top=args.top)
    print(json.dumps(rep.model_dump(), indent=1) if args.json else format_report(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
