"""Where a referee's evaluation time goes: the newest cProfile files of ADAEXPLORE_PROFILE_DIR.

    ADAEXPLORE_PROFILE_DIR=/tmp/prof python bench/timing_agreement.py ...   # one .prof per evaluation
    python devtools/profile_summary.py /tmp/prof [--last 2] [--top 40]

Prints, for each of the newest files, the functions by cumulative and by own time.
"""

from __future__ import annotations

import argparse
import pstats
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory", type=Path)
    ap.add_argument("--last", type=int, default=2, help="how many of the newest profiles")
    ap.add_argument("--top", type=int, default=40, help="rows per table")
    args = ap.parse_args()
    files = sorted(args.directory.glob("*.prof"), key=lambda f: f.stat().st_mtime)[-args.last:]
    if not files:
        raise SystemExit(f"no .prof files in {args.directory}")
    for path in files:
        print(f"===== {path}")
        stats = pstats.Stats(str(path))
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top // 2)


if __name__ == "__main__":
    main()
