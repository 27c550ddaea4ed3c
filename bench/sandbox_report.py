"""What the runner sandbox achieves on this host, for the CPU and the GPU policy, and whether a runner starts
under it: the mechanisms applied and, for each one missing, the reason. Prints a table; --out writes JSON.

    python bench/sandbox_report.py [--out sandbox_report.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from adaexplore_mcp.judge.referee import sandbox_policy
from adaexplore_mcp.judge.sandbox_probe import capabilities


def report(device: str, home: Path) -> dict:
    policy = sandbox_policy("auto", home, home / "cache", device)
    rep = capabilities(policy, timeout_s=30.0)
    return {"device": device, "summary": rep.summary, "mechanisms": list(rep.mechanisms), "missing": list(rep.missing),
            "hidden_dirs": list(policy.hidden_dirs), "visible_dirs": list(policy.visible_dirs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "cache").mkdir()
        rows = [report(device, Path(tmp)) for device in ("cpu", "cuda")]
    for r in rows:
        print(f"{r['device']:5} {r['summary']:32} applied: {', '.join(r['mechanisms'])}")
        for m in r["missing"]:
            print(f"{'':5} missing: {m}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
