"""GPU timing attacks against the judge, each with its expected outcome. Not a test (needs a GPU).

    python bench/redteam_gpu.py --out redteam_gpu.json

The task is GELU(x * 2 + 1) over a 16384 x 4096 float32 tensor; the honest candidate is one Triton
kernel. Each attack wraps the honest candidate: it does the same work but tries to look faster (a side
stream, patched CUDA events, work deferred past its return, slowing the reference down, behaving
differently once timed, caching outputs) or to pass without its kernel doing the work. Expected: the
attack is rejected or mismatches, or passes with a speedup no higher than the honest one (+15%).
After every attack the honest candidate is evaluated again (the canary) and must pass.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from adaexplore_mcp.config import Settings  # noqa: E402
from adaexplore_mcp.judge import Judge  # noqa: E402
from adaexplore_mcp.tasks.format import TaskSpec  # noqa: E402

TASK = '''
import torch
import torch.nn as nn

rows, cols = 16384, 4096


class Model(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x * 2 + 1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
'''

HONEST = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_affine(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) * 2 + 1
    y = 0.5 * x * (1 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


def run(x, y):
    n = x.numel()
    gelu_affine[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return run(x, torch.empty_like(x))
'''

ATTACKS = {
    "side_stream": ('''
_s = []
class ModelNew(ModelNew):
    def forward(self, x):
        if not _s:
            _s.append(torch.cuda.Stream())
        y = torch.empty_like(x)
        with torch.cuda.stream(_s[0]):
            run(x, y)
        return y
''', "no inflated speedup"),
    "patched_events": ('''
torch.cuda.Event.elapsed_time = lambda self, end: 1e-4
''', "no inflated speedup"),
    "deferred_thread": ('''
import threading
class ModelNew(ModelNew):
    def forward(self, x):
        y = torch.empty_like(x)
        threading.Timer(0.002, lambda: run(x, y)).start()
        return y
''', "not passed"),
    "slow_down_reference": ('''
import threading
def _burn():
    a = torch.randn(4096, 4096, device="cuda")
    while True:
        a = torch.tanh(a @ a)
class ModelNew(ModelNew):
    def __init__(self):
        super().__init__()
        threading.Thread(target=_burn, daemon=True).start()
''', "no inflated speedup"),
    "lazy_when_timed": ('''
_calls = [0]
class ModelNew(ModelNew):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] > 12:
            return torch.zeros_like(x)
        return run(x, torch.empty_like(x))
''', "not passed"),
    "cache_by_pointer": ('''
_cache = {}
class ModelNew(ModelNew):
    def forward(self, x):
        key = (x.data_ptr(), x.shape)
        if key not in _cache:
            _cache[key] = run(x, torch.empty_like(x))
        return _cache[key]
''', "not passed"),
    # Honest through the trials (fresh inputs each), then an output cache keyed on the input pointer: the
    # timed blocks lend the same input sets again, so every block after the first could be answered from it.
    "cache_across_blocks": ('''
_cache = {}
_calls = [0]
class ModelNew(ModelNew):
    def forward(self, x):
        _calls[0] += 1
        key = (x.data_ptr(), x.shape)
        if _calls[0] > 12 and key in _cache:
            return _cache[key]
        _cache[key] = out = run(x, torch.empty_like(x))
        return out
''', "no inflated speedup"),
    # Events that claim half the real time, and each short block stalled by the time they hid in it, so every
    # pair of blocks (n, 2n calls) shows the reference's excess: only a long block's own excess gives it away.
    "pad_short_blocks": ('''
import time as _time
from adaexplore_mcp.judge import timing as _timing
_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: 0.5 * _elapsed(self, end)
_block, _lengths = _timing.Bench.block, []
def _padded(self, call, calls, warmup):
    times, outs = _block(self, call, calls, warmup)
    _lengths.append(calls)
    if len(_lengths) > 1 and calls == _lengths[1]:  # after the 3-call estimate, the first block is a short one
        _time.sleep(sum(times) / 1e3)
    return times, outs
_timing.Bench.block = _padded
''', "no inflated speedup"),
    # Whatever it is lent before it says "primed" it computes at once, off the wall clock, and answers the
    # timed calls from that hoard (keyed on the input's pointer).
    "hoard_while_priming": ('''
from adaexplore_mcp.judge import runner_timing as _rt
_prime, _hoard = _rt.TimingOps._prime, {}
def _hoarding(self, model, given, calls):
    for s in (given if given and isinstance(given[0], (list, tuple)) else [given]):
        _hoard[s[0].data_ptr()] = run(s[0], torch.empty_like(s[0]))
    return _prime(self, model, given, calls)
_rt.TimingOps._prime = _hoarding
class ModelNew(ModelNew):
    def forward(self, x):
        y = _hoard.pop(x.data_ptr(), None)
        return y if y is not None else run(x, torch.empty_like(x))
''', "no inflated speedup"),
    "token_kernel_torch_work": ('''
class ModelNew(ModelNew):
    def forward(self, x):
        scratch = torch.empty(16, device=x.device)
        run(scratch, torch.empty_like(scratch))
        return torch.nn.functional.gelu(x * 2 + 1)
''', "not passed"),
    "copy_pytorch_result": ('''
@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(ModelNew):
    def forward(self, x):
        y = torch.nn.functional.gelu(x * 2 + 1)
        out = torch.empty_like(y)
        _copy[(triton.cdiv(y.numel(), 1024),)](y, out, y.numel(), BLOCK=1024)
        return out
''', "not passed"),
    "sentinel_then_torch": ('''
@triton.jit
def _flag(flag_ptr):
    tl.store(flag_ptr, 1)


class ModelNew(ModelNew):
    def forward(self, x):  # garbage whenever its kernels seem skipped; PyTorch's work otherwise
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _flag[(1,)](flag)
        if int(flag.item()) == 0:
            return torch.full_like(x, float("nan"))
        return torch.nn.functional.gelu(x * 2 + 1)
''', "not passed"),
}


def outcome(ev, honest_speedup: float | None) -> str:
    if ev.verdict.value != "passed":
        return ev.verdict.value + (f":{ev.rejected.check}" if ev.rejected else "")
    return f"passed {ev.speedup:.2f}x" if ev.speedup else "passed"


def held(expect: str, ev, honest_speedup: float | None) -> bool:
    if ev.verdict.value != "passed":
        return True
    if expect == "not passed":
        return False
    return ev.speedup is not None and honest_speedup is not None and ev.speedup <= 1.15 * honest_speedup


def detail(ev) -> dict:
    """Why a speedup is what it is: both medians, the candidate's spread, the judge's wall clock per call,
    the clocks and the warnings (honest runs that disagree are explained by these, not guessed at)."""
    t = ev.timing
    if t is None:
        return {"warnings": ev.warnings[:2]}
    return {"cand_ms": t.candidate.median_ms, "cand_iqr_ms": t.candidate.iqr_ms, "ref_ms": t.reference.median_ms,
            "wall_per_call_ms": t.wall_per_call_ms, "outside_per_call_ms": t.outside_per_call_ms,
            "blocks": t.blocks, "clocks": t.clocks.model_dump() if t.clocks else None,
            "warnings": ev.warnings[:2]}


def finish(rows: list[dict], canaries: list[float]) -> float:
    """The honest speedup is the median of every honest evaluation; each attack is held against it."""
    import statistics

    base = statistics.median(canaries)
    for r in rows:
        if r["attack"] != "honest" and r["expect"] == "no inflated speedup" and r["outcome"].startswith("passed"):
            r["held"] = r["speedup"] <= 1.15 * base
    return base


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--sandbox", default="auto")
    args = ap.parse_args()
    import torch
    import triton

    task = TaskSpec(task_id="redteam-gelu", name="redteam-gelu", source=TASK)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        judge = Judge(Settings(home=Path(tmp), sandbox=args.sandbox))
        try:
            honest = judge.evaluate(task, HONEST)
            base = honest.speedup
            canaries = [honest.speedup or 0.0]
            rows.append({"attack": "honest", "expect": "passed", "outcome": outcome(honest, base),
                         "held": honest.verdict.value == "passed", "canary": "-", "warnings": honest.warnings,
                         "detail": detail(honest)})
            for name, (patch, expect) in ATTACKS.items():
                ev = judge.evaluate(task, HONEST + patch)
                canary = judge.evaluate(task, HONEST)
                canaries.append(canary.speedup or 0.0)
                rows.append({"attack": name, "expect": expect, "outcome": outcome(ev, base), "held": held(expect, ev, base),
                             "speedup": ev.speedup, "canary": outcome(canary, base), "warnings": ev.warnings[:2],
                             "canary_ok": canary.verdict.value == "passed", "detail": detail(ev),
                             "canary_detail": detail(canary)})
                print(f"  {name}: {rows[-1]['outcome']} {rows[-1]['detail']} (canary {rows[-1]['canary']} "
                      f"{rows[-1]['canary_detail']})", file=sys.stderr, flush=True)
            gpu = honest.timing.gpu if honest.timing else None
            base = finish(rows, canaries)
        finally:
            judge.close()
    report = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpu": gpu,
              "honest_median_speedup": base, "honest_speedups": canaries,
              "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(),
              "sandbox": honest.sandbox, "rows": rows}
    args.out.write_text(json.dumps(report, indent=2))
    print(f"GPU timing attacks on {gpu}, torch {torch.__version__}, triton {triton.__version__}, sandbox "
          f"{honest.sandbox}, {report['date']}; honest speedup median {base:.2f}x over {len(canaries)} runs "
          f"(min {min(canaries):.2f}, max {max(canaries):.2f})\n")
    print("| attack | expected | outcome | held | canary after |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['attack']} | {r['expect']} | {r['outcome']} | {'yes' if r['held'] else 'NO'} | {r['canary']} |")


if __name__ == "__main__":
    main()
