"""Large tasks in sequence in one server process: GPU memory must not pile up. Not a test (needs a GPU).

    python bench/large_tasks.py --out large_tasks.json [--count 30]

Each task is an elementwise op over a 4096 x 393216 float32 input (6 GiB per tensor, the size of the
KernelBench Level-1 elementwise problems), written here in KernelBench format. One App (the server's
whole path: create_task probes the reference, evaluate_kernel judges a one-kernel Triton candidate)
creates and evaluates every task in turn. Printed: per task, create and evaluation time and verdict,
and the GPU memory the judge's processes hold afterwards (free memory as the driver reports it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.app import App  # noqa: E402
from adaexplore_mcp.config import Settings  # noqa: E402

TANH = "(2 * tl.sigmoid(2 * x) - 1)"
OPS = [  # (name, torch expression of x, Triton expression of x)
    ("relu", "torch.relu(x)", "tl.maximum(x, 0.0)"),
    ("sigmoid", "torch.sigmoid(x)", "tl.sigmoid(x)"),
    ("tanh", "torch.tanh(x)", TANH),
    ("gelu", "F.gelu(x)", "0.5 * x * (1 + tl.erf(x * 0.7071067811865476))"),
    ("silu", "F.silu(x)", "x * tl.sigmoid(x)"),
    ("softplus", "F.softplus(x)", "tl.where(x > 20, x, tl.log(1 + tl.exp(x)))"),
    ("elu", "F.elu(x)", "tl.where(x > 0, x, tl.exp(x) - 1)"),
    ("leaky_relu", "F.leaky_relu(x, 0.01)", "tl.where(x > 0, x, 0.01 * x)"),
    ("hardtanh", "F.hardtanh(x)", "tl.minimum(tl.maximum(x, -1.0), 1.0)"),
    ("hardsigmoid", "F.hardsigmoid(x)", "tl.minimum(tl.maximum(x / 6 + 0.5, 0.0), 1.0)"),
    ("softsign", "F.softsign(x)", "x / (1 + tl.abs(x))"),
    ("selu", "torch.selu(x)", "1.0507009873554805 * tl.where(x > 0, x, 1.6732632423543772 * (tl.exp(x) - 1))"),
    ("abs", "torch.abs(x)", "tl.abs(x)"),
    ("neg", "-x", "-x"),
    ("square", "x * x", "x * x"),
    ("exp", "torch.exp(x)", "tl.exp(x)"),
    ("relu6", "F.relu6(x)", "tl.minimum(tl.maximum(x, 0.0), 6.0)"),
    ("hardswish", "F.hardswish(x)", "x * tl.minimum(tl.maximum(x + 3, 0.0), 6.0) / 6"),
    ("logsigmoid", "F.logsigmoid(x)", "tl.log(tl.sigmoid(x))"),
    ("sin", "torch.sin(x)", "tl.sin(x)"),
    ("cos", "torch.cos(x)", "tl.cos(x)"),
    ("affine", "x * 2 + 1", "x * 2 + 1"),
    ("clamp", "x.clamp(-0.5, 0.5)", "tl.minimum(tl.maximum(x, -0.5), 0.5)"),
    ("erf", "torch.erf(x)", "tl.erf(x)"),
    ("tanhshrink", "F.tanhshrink(x)", f"x - {TANH}"),
    ("softshrink", "F.softshrink(x, 0.5)", "tl.where(x > 0.5, x - 0.5, tl.where(x < -0.5, x + 0.5, 0.0))"),
    ("hardshrink", "F.hardshrink(x, 0.5)", "tl.where(tl.abs(x) > 0.5, x, 0.0)"),
    ("mish", "F.mish(x)", "x * (2 * tl.sigmoid(2 * tl.log(1 + tl.exp(x))) - 1)"),
    ("log1p_abs", "torch.log1p(x.abs())", "tl.log(1 + tl.abs(x))"),
    ("sqrt_abs", "torch.sqrt(x.abs())", "tl.sqrt(tl.abs(x))"),
]

REFERENCE = '''import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
dim = 393216


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

CANDIDATE = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def op_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, {expr}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        op_kernel[(triton.cdiv(n, 2048),)](x, y, n, BLOCK=2048)
        return y
'''


def free_gib() -> float:
    import torch

    free, _ = torch.cuda.mem_get_info()
    return free / 2**30


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--count", type=int, default=30)
    args = ap.parse_args()
    import torch
    import triton

    rows: list[dict] = []
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
              "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
              "python": platform.python_version(), "rows": rows}

    def save() -> None:  # after every task: a run cut short keeps what it measured
        args.out.write_text(json.dumps(report, indent=2))

    with tempfile.TemporaryDirectory() as tmp:
        app = App(Settings(home=Path(tmp)))
        try:
            for name, torch_expr, tl_expr in OPS[: args.count]:
                t0 = time.perf_counter()
                try:
                    info, _ = app.create_task(f"large_{name}", REFERENCE.format(expr=torch_expr))
                except Exception as exc:  # noqa: BLE001 - recorded: this is what the benchmark looks for
                    rows.append({"task": name, "create": f"{type(exc).__name__}: {str(exc)[:200]}"})
                    print(f"  {name}: create failed: {exc}", file=sys.stderr, flush=True)
                    save()
                    continue
                create_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                ev = app.evaluate_kernel(info.task_id, CANDIDATE.format(expr=tl_expr))
                rows.append({"task": name, "create": "ok", "create_s": create_s, "eval_s": time.perf_counter() - t0,
                             "verdict": ev.verdict.value, "speedup": ev.speedup,
                             "error": ev.error.message if ev.error else None,
                             "mismatch": ev.mismatch.model_dump() if ev.mismatch else None,
                             "free_gib_after": free_gib(), "stages_ms": ev.stages_ms,
                             "warnings": ev.warnings[:3]})
                print(f"  {name}: {ev.verdict.value} speedup {ev.speedup} create {create_s:.1f}s eval "
                      f"{rows[-1]['eval_s']:.1f}s free {rows[-1]['free_gib_after']:.1f} GiB"
                      + (f" error: {rows[-1]['error'][:500]}" if rows[-1]["error"] else ""), file=sys.stderr, flush=True)
                save()
        finally:
            app.close()
    save()
    ok = sum(1 for r in rows if r.get("verdict") == "passed")
    print(f"{len(rows)} large tasks (4096 x 393216 float32) on {report['gpu']}, torch {torch.__version__}, "
          f"triton {triton.__version__}, {report['date']}: {ok} passed\n")
    print("| task | create | create (s) | verdict | eval (s) | speedup | GPU free after (GiB) |\n|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda k: "-" if r.get(k) is None else f"{r[k]:.2f}"  # noqa: E731
        print(f"| {r['task']} | {r['create'][:40]} | {f('create_s')} | {r.get('verdict', '-')} | {f('eval_s')} | "
              f"{f('speedup')} | {f('free_gib_after')} |")


if __name__ == "__main__":
    main()
