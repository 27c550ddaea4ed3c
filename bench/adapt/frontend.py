"""Re-check an Adapt run's drafts with Triton's real compiler front end on the CPU (no GPU needed).

    python bench/adapt/frontend.py adapt_results.json [--out frontend.json]

The CPU Adapt run judges drafts under the interpreter, which accepts some kernels the compiler rejects
(a plain module-level constant, ...) and rejects some it accepts (libdevice returns None there).
This script compiles every kernel each stored draft launches down to Triton IR for a fake sm_90 target
(`devtools.triggers`' front-end mode: nothing runs, so outputs are garbage and only the
compile verdict counts) and prints how the two verdicts compare, with the front end's error signatures.
Needs the run's JSON with sources (failed drafts always have them; `--keep-sources` stores all).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _setup() -> type:
    if os.environ.get("TRITON_INTERPRET"):
        raise SystemExit("run without TRITON_INTERPRET: this checks the compiler front end")
    from triton.runtime.jit import JITFunction

    from devtools.triggers import _FrontendDone, _install_frontend_target

    _install_frontend_target()
    original = JITFunction.run

    def run(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        except _FrontendDone:
            return None  # this kernel compiled to IR; go on to the next launch

    JITFunction.run = run
    return _FrontendDone


def check(task_source: str, small: dict, draft: str, tmp: Path, n: int) -> str | None:
    """None when every launched kernel compiles; else the error's signature."""
    import torch

    from adaexplore_mcp.memory.signature import signature

    ref = types.ModuleType(f"ref_{n}")
    exec(compile(task_source, f"<ref_{n}>", "exec"), ref.__dict__)
    for k, v in (small or {}).items():
        setattr(ref, k, v)
    path = tmp / f"draft_{n}.py"
    path.write_text(draft)
    import importlib.util

    try:
        spec = importlib.util.spec_from_file_location(f"draft_{n}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        torch.manual_seed(0)
        model = mod.ModelNew(*ref.get_init_inputs())
        with torch.no_grad():
            model(*ref.get_inputs())
    except BaseException as exc:  # noqa: BLE001 - candidate code
        text = traceback.format_exc()
        return signature(type(exc).__name__, str(exc).strip().splitlines()[-1] if str(exc).strip() else "", text)
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    res = json.loads(Path(args.results).read_text())
    sources = res.get("task_sources") or {}
    if not sources:
        raise SystemExit("the results JSON has no task_sources (re-run bench/adapt_loop.py)")
    import warnings

    warnings.filterwarnings("ignore")
    _setup()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, e in enumerate(res["evaluations"]):
            if "source" not in e:
                continue
            t = sources[e["task"]]
            fe = check(t["source"], t["small_shapes"], e["source"], Path(tmp), n)
            interp = e["signature"] if e["verdict"] in ("compile_error", "runtime_error", "crashed", "timeout") else None
            rows.append({"task": e["task"], "draft": e["draft"], "interpreter_verdict": e["verdict"],
                         "interpreter_signature": interp, "frontend_signature": fe})
    pairs = collections.Counter(
        ("error" if r["interpreter_signature"] else "ok", "error" if r["frontend_signature"] else "ok") for r in rows)
    print("| interpreter \\ front end | ok | error |\n|---|---|---|")
    for a in ("ok", "error"):
        print(f"| {a} | {pairs[(a, 'ok')]} | {pairs[(a, 'error')]} |")
    print("\n| count | front-end signature | interpreter said |\n|---|---|---|")
    sig = collections.Counter((r["frontend_signature"], r["interpreter_signature"] or r["interpreter_verdict"])
                              for r in rows if r["frontend_signature"] or r["interpreter_signature"])
    for (fe, it), c in sig.most_common():
        print(f"| {c} | `{(fe or 'compiles')[:100]}` | `{(it or '')[:80]}` |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
