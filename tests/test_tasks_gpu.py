"""GPU checks of the built-in solutions at full shapes (run on the GPU machine, not in CI).

`pytest -m gpu tests/test_tasks_gpu.py` checks correctness for the default tunables and a sweep of
allowed values; `python tests/test_tasks_gpu.py [--sweep] [--out results.json]` also prints timings.
"""

from __future__ import annotations

import atexit
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from adaexplore_mcp.tasks.format import import_file, write_module_file
from adaexplore_mcp.tasks.library import builtin_tasks
from adaexplore_mcp.tasks.solutions import set_tunable, solutions

pytestmark = pytest.mark.gpu

_modules_dir: list[Path] = []  # made on first use, removed at exit: collecting these tests (CI) writes nothing


def _load(prefix: str, source: str):
    if not _modules_dir:
        _modules_dir.append(Path(tempfile.mkdtemp(prefix="ada_tasks_gpu_")))
        atexit.register(shutil.rmtree, _modules_dir[0], True)
    name, path = write_module_file(_modules_dir[0], prefix, source)
    return import_file(name, path)


def sweep_combos(sol, n_random: int = 2) -> list[dict[str, int]]:
    """Defaults, each allowed value of each tunable alone, all-min, all-max, a few random."""
    combos = [dict(sol.defaults)]
    for k, values in sol.tunables.items():
        for v in values:
            if v != sol.defaults[k]:
                combos.append({**sol.defaults, k: v})
    combos.append({k: min(v) for k, v in sol.tunables.items()})
    combos.append({k: max(v) for k, v in sol.tunables.items()})
    rng = random.Random(sol.task_name + sol.variant)
    for _ in range(n_random):
        combos.append({k: rng.choice(v) for k, v in sol.tunables.items()})
    out, seen = [], set()
    for c in combos:
        key = tuple(sorted(c.items()))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def with_tunables(source: str, combo: dict[str, int]) -> str:
    for k, v in combo.items():
        source = set_tunable(source, k, v)
    return source


class Setup:
    def __init__(self, task, seed: int = 0):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.mod = _load("ref", task.source)
        torch.manual_seed(seed)
        with torch.device("cuda"):
            self.ref = self.mod.Model(*self.mod.get_init_inputs()).eval()
            self.inputs = self.mod.get_inputs()
        with torch.no_grad():
            self.expected = self.ref(*self.inputs)
        torch.cuda.synchronize()

    def candidate(self, source: str):
        mod = _load("cand", source)
        with torch.device("cuda"):
            new = mod.ModelNew(*self.mod.get_init_inputs()).eval()
        new.load_state_dict(self.ref.state_dict(), strict=False)
        return new

    def check(self, new) -> float:
        with torch.no_grad():
            got = new(*self.inputs)
        torch.cuda.synchronize()
        assert got.shape == self.expected.shape and got.dtype == self.expected.dtype
        err = (got - self.expected).abs()
        excess = (err - (1e-2 + 1e-2 * self.expected.abs())).max().item()
        assert excess <= 0 and torch.isfinite(got).all(), f"max abs err {err.max().item():.3g}"
        return err.max().item()


def bench(fn) -> float:
    import triton.testing

    with torch.no_grad():
        return float(triton.testing.do_bench(fn, warmup=10, rep=50))


def _cases():
    return [(t, s) for t in builtin_tasks() for s in solutions(t.name)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[0].name}-{c[1].variant}")
def test_solution_full_shape(case):
    task, sol = case
    setup = Setup(task)
    for combo in sweep_combos(sol, n_random=1)[:6]:
        setup.check(setup.candidate(with_tunables(sol.source, combo)))


def synth_main(count: int, seed: int, out_path: str | None) -> int:
    """Full-shape GPU probe of synthesized tasks: reference time, memory, degeneracy at full size."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: devtools/ is at the repo root
    from adaexplore_mcp.tasks.synthesis import synthesize
    from devtools.task_checks import load_source, nondegeneracy_problem

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tasks = synthesize(count, seed=seed)
    rows, bad = [], 0
    for t in tasks:
        row = {"name": t.name, "dtype": t.dtype}
        try:
            with torch.device("cuda"):
                problem = nondegeneracy_problem(load_source(t.source, t.name), {}, t.atol, t.rtol)
                mod = load_source(t.source, t.name)
                model = mod.Model(*mod.get_init_inputs()).eval()
                inputs = mod.get_inputs()
            row["problem"] = problem
            row["ref_ms"] = bench(lambda: model(*inputs))
            row["in_mb"] = sum(x.numel() * x.element_size() for x in inputs) / 2**20
        except Exception as exc:  # noqa: BLE001
            row["problem"] = f"{type(exc).__name__}: {exc}"[:300]
        bad += bool(row["problem"])
        print(f"{t.name:50s} {row.get('ref_ms', float('nan')):8.4f} ms  in {row.get('in_mb', 0):7.1f} MB  "
              f"{row['problem'] or 'ok'}", flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    if out_path:
        Path(out_path).write_text(json.dumps(rows, indent=1))
    print(f"{bad} of {len(rows)} degenerate or failing at full shapes", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if "--synth" in argv:
        count = next((int(a.split("=")[1]) for a in argv if a.startswith("--count=")), 20)
        seed = next((int(a.split("=")[1]) for a in argv if a.startswith("--seed=")), 11)
        return synth_main(count, seed, next((a for a in argv if a.endswith(".json")), None))
    sweep = "--sweep" in argv
    time_all = "--time-all" in argv
    n_random = next((int(a.split("=")[1]) for a in argv if a.startswith("--random=")), 2)
    only = [a for a in argv if not a.startswith("--") and not a.endswith(".json")]
    out_path = next((a for a in argv if a.endswith(".json")), None)
    results = []
    print("GPU:", torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    import triton

    print("triton", triton.__version__, flush=True)
    for task in builtin_tasks():
        if only and task.name not in only:
            continue
        setup = Setup(task)
        ref_ms = bench(lambda: setup.ref(*setup.inputs))
        for sol in solutions(task.name):
            row = {"task": task.name, "variant": sol.variant, "ref_ms": ref_ms, "failures": []}
            combos = sweep_combos(sol, n_random) if sweep else [sol.defaults]
            for i, combo in enumerate(combos):
                t0 = time.time()
                try:
                    new = setup.candidate(with_tunables(sol.source, combo))
                    err = setup.check(new)
                    if i == 0:
                        row["ms"] = bench(lambda: new(*setup.inputs))
                        row["max_err"] = err
                    elif time_all:
                        row.setdefault("timed", []).append({"combo": combo, "ms": bench(lambda: new(*setup.inputs))})
                except Exception as exc:  # report and continue
                    row["failures"].append({"combo": combo, "error": f"{type(exc).__name__}: {exc}"[:400]})
                if time.time() - t0 > 20:
                    print("  slow combo", combo, f"{time.time() - t0:.1f}s", flush=True)
            row["n_combos"] = len(combos)
            print(f"{task.name:20s} {sol.variant:26s} ref {ref_ms:.4f} ms  new {row.get('ms', float('nan')):.4f} ms"
                  f"  speedup {ref_ms / row['ms'] if 'ms' in row else 0:.2f}x  combos {len(combos)}"
                  f"  fails {len(row['failures'])}", flush=True)
            for f in row["failures"][:3]:
                print("   FAIL", f, flush=True)
            for t in sorted(row.get("timed", []), key=lambda t: t["ms"])[:3]:
                print(f"   best {t['ms']:.4f} ms {t['combo']}", flush=True)
            results.append(row)
            if out_path:
                Path(out_path).write_text(json.dumps(results, indent=1))
        del setup
        torch.cuda.empty_cache()
    if out_path:
        Path(out_path).write_text(json.dumps(results, indent=1))
    return 0 if all(not r["failures"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
