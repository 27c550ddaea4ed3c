"""Run broken kernels and capture the error texts they really produce (seed-rule triggers, fixtures).

Three modes, each in its own subprocess (the mode must be fixed before triton is imported):
- ``interpreter``: ``TRITON_INTERPRET=1``, kernels run on the CPU exactly as the judge runs them here;
- ``frontend``: the real compiler's front end (Python AST -> TTIR) for a fake CUDA target
  (sm_90), so compile errors a GPU would report are reproduced on a machine without one. The launch
  goes through the real `JITFunction.run` (argument binding, specialization), then stops after TTIR;
- ``native``: plain compiled mode on the machine's own GPU (what `bench/collect_errors.py` uses on
  the GPU host).

A case is a Python source file defining kernels and one or more ``trigger*(device)`` functions.
Nothing here is imported by the server: it is a tool for tests and the benchmark scripts, so it lives
in `devtools/` (not installed with the package); the seed rules' trigger names stay in memory/seed.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from adaexplore_mcp import pyparse

MODES = ("interpreter", "frontend", "native")


@dataclass
class Observed:
    path: str
    entry: str
    mode: str
    raised: bool
    exception: str = ""
    message: str = ""
    text: str = ""
    triton_version: str = ""
    note: str = ""
    detail: dict | None = None  # what a `describe` hook made of the exception (the judge's ErrorDetail)


def trigger_names(source: str) -> list[str]:
    """The ``trigger*`` functions a case file defines, in file order."""
    import ast

    tree = pyparse.parse(source)
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("trigger")]


def run_cases(cases: list[tuple[str, str]], mode: str, timeout_s: float = 600.0,
              case_timeout_s: int = 20, describe: str | None = None) -> list[Observed]:
    """Run ``(path, entry)`` cases in a fresh subprocess of ``mode`` (and in another for the cases left
    when one dies or leaves); one Observed per case."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if mode == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    cases = [list(c) for c in cases]
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "devtools.triggers"],
            input=json.dumps({"mode": mode, "cases": cases, "case_timeout_s": case_timeout_s,
                              "describe": describe}),
            capture_output=True, text=True, timeout=timeout_s, env=env,
            cwd=str(Path(__file__).resolve().parents[1]),  # the repo root: `devtools` importable
        )
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        stderr, rc = "timed out", -9
    results = [Observed(**json.loads(line[len("@@RESULT "):]))
               for line in stdout.splitlines() if line.startswith("@@RESULT ")]
    done = {(r.path, r.entry) for r in results}
    missing = [c for c in cases if tuple(c) not in done]
    if missing and not results:
        raise RuntimeError(f"trigger worker failed to start ({mode}): {stderr[-2000:]}")
    if missing:
        # The worker died in a case (noted as a crash) or left after a case poisoned the CUDA context
        # (that case's result came back before it left): run the rest in a new worker.
        if "@@POISONED" in stdout:
            rest = missing
        else:
            crashed, rest = missing[0], missing[1:]
            results.append(Observed(crashed[0], crashed[1], mode, True, "WorkerCrashed",
                                    f"worker exited with {rc}", stderr[-4000:]))
        if rest:
            results.extend(run_cases(rest, mode, timeout_s, case_timeout_s, describe))
    return results


# ---------------------------------------------------------------- worker side (in the subprocess)

class _FrontendDone(Exception):
    """Raised after TTIR was produced: the front end accepted the kernel."""


class CaseTimeout(Exception):
    """The case ran past its time limit (an endless loop under the interpreter)."""


def _alarm(signum, frame):
    raise CaseTimeout("case ran past its time limit")


def _install_frontend_target() -> None:
    import triton.compiler as tc
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class FakeCudaDriver:
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

        def get_device_interface(self):
            import torch
            return torch.cuda

        def get_active_torch_device(self):
            import torch
            return torch.device("cpu")

    real_compile = tc.compile

    def frontend_compile(src, target=None, options=None, **_: object):
        from triton.compiler.compiler import make_backend
        from triton._C.libtriton import ir

        backend = make_backend(target)
        opts = backend.parse_options(options or {})
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        src.make_ir(target, opts, backend.get_codegen_implementation(opts), backend.get_module_map(), context)
        raise _FrontendDone()

    tc.compile = frontend_compile
    tc._real_compile = real_compile
    driver.set_active(FakeCudaDriver())


def clip_traceback(text: str, head: int = 6000, tail: int = 10000) -> str:
    """Keep a chained traceback's start (the root cause) and end (the final error)."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n  [...]\n" + text[-tail:]


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1].strip() if text else ""


def _worker() -> None:
    import importlib
    import importlib.util
    import signal
    import traceback

    job = json.loads(sys.stdin.read())
    mode = job["mode"]
    import triton

    if mode == "frontend":
        _install_frontend_target()
    device = "cuda" if mode == "native" else "cpu"
    # Optional: a module with `describe(exc, CandidateFile(path, source))` (the judge's classifier),
    # named by the caller so this module never imports the judge itself.
    hook = importlib.import_module(job["describe"]) if job.get("describe") else None
    signal.signal(signal.SIGALRM, _alarm)
    for i, (path, entry) in enumerate(job["cases"]):
        obs = Observed(path, entry, mode, False, triton_version=triton.__version__)
        signal.alarm(int(job.get("case_timeout_s", 20)))
        try:
            spec = importlib.util.spec_from_file_location(f"_case_{i}_{Path(path).stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            getattr(module, entry)(device)
            if mode == "native":
                import torch
                torch.cuda.synchronize()
        except _FrontendDone:
            obs.note = "frontend accepted the kernel"
        except BaseException as exc:  # noqa: BLE001 - capturing is the point
            obs.raised = True
            obs.exception = type(exc).__name__
            obs.message = _last_line(exc)
            obs.text = clip_traceback(traceback.format_exc())
            if hook is not None:
                cand = hook.CandidateFile(path=path, source=Path(path).read_text())
                obs.detail = hook.describe(exc, cand).model_dump()
        finally:
            signal.alarm(0)
        print("@@RESULT " + json.dumps(asdict(obs)), flush=True)
        if mode == "native" and obs.raised and "CUDA error" in obs.text:
            print("@@POISONED", flush=True)  # the context is unusable: the parent starts a new worker
            os._exit(3)


if __name__ == "__main__":
    _worker()
