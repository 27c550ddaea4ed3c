"""What saying each parent once saves: a campaign's stored next_step responses, as they were handed out and as
the server now writes them (`search/brief_batch.py`: a step grown from the parent of an earlier step of the
answer names it in `same_parent_as`). Reads only the campaign folder's briefs; prints a table. CPU.

    python bench/brief_sharing.py --dir .campaign/D
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.search.brief_batch import assemble, whole_steps  # noqa: E402
from adaexplore_mcp.search.types import StepBrief  # noqa: E402


def sizes(path: Path) -> tuple[int, int, int]:
    """(steps, characters as stored, characters as the server writes the same steps now)."""
    stored = json.loads(path.read_text())
    steps = whole_steps(StepBrief.model_validate(stored))
    now = assemble(steps, [True] * len(steps))
    return len(steps), len(json.dumps(stored)), len(json.dumps(now.model_dump(mode="json")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="a campaign folder (its briefs/<search>/round-<n>.json)")
    args = ap.parse_args(argv)
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for path in sorted(Path(args.dir).glob("briefs/*/round-*.json")):
        n, before, after = sizes(path)
        if n < 2:
            continue
        row = totals[(path.parent.name.split("__", 1)[1], path.stem)]
        row[0] += 1
        row[1] += n
        row[2] += before
        row[3] += after
    print("| strategy | response | responses | steps | chars as handed out | chars now | per step, now | saved |")
    print("|---|---|---|---|---|---|---|---|")
    for (strategy, rnd), (count, steps, before, after) in sorted(totals.items()):
        print(f"| {strategy} | {rnd} | {count} | {steps} | {before:,} | {after:,} | {after // steps:,} | "
              f"{1 - after / before:.0%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
