"""The runner: the only process where candidate or task code runs. Untrusted by design.

A runner is forked from the zygote, enters the sandbox, and then serves one role for its whole life:
`ref` (one task's reference: its inputs, its outputs, its timing) or `cand` (exactly one candidate,
then it is killed). It speaks `wire` with the referee and never sees the other side's objects: the
reference's model, inputs and outputs are not in a candidate's process, so there is nothing to copy.

Everything a runner reports about itself (which kernels launched, flags flipped, its own event
timings) is evidence from an untrusted process: it catches honest mistakes; the referee decides the
verdict from what it can check itself (outputs it maps read-only, and its own wall clock).
"""

from __future__ import annotations

import contextlib
import os
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from ..tasks.format import apply_shapes, import_file, source_with_constants
from . import launches, precision, seeding, wire
from ..errors import safe_str
from .compare import aliased_output, cloned, nbytes, refuse_shared, unsendable_reason
from .device_memory import KEEP_CACHED_BYTES, give_back, out_of_memory
from .host_inputs import on_device
from .kernel_cache import kernel_cache_dir, read_tree, take_kernel_files
from .checks.buffer_reuse import with_decoy_first
from .checks.off_distribution import draw_off_distribution
from .checks.perturbation import perturb, state_index
from .op_trace import OpTrace
from .replay import ReplayOps
from .runners import WATCHDOG_LEAD_S
from .runner_timing import TimingOps
from .runner_task import TaskOps
from .stuck_watch import StuckWatch
from .work_trace import ProgramOps, WorkTrace
from .classify import STAGE_BUILD, STAGE_IMPORT, STAGE_RUN, CandidateFile, classify, escaped, reference_error
from .user_signals import calm, own_handlers, quiet

MAX_FROM_REFEREE = 1 << 34  # the referee is trusted; the bound only stops a corrupt stream
CLONE_BYTES = 1 << 30  # inputs below this are copied before the reference's forward (it may write them)


class Runner(TimingOps, ReplayOps, ProgramOps, TaskOps):
    def __init__(self, conn: Connection, device: str, tmp: Path) -> None:
        self.conn, self.device, self.tmp = conn, device, tmp
        self.module: Any = None
        self.file: CandidateFile | None = None
        self.role = ""
        self.init_inputs: list[Any] = []
        self.model: Any = None
        self.stashed: Any = None
        self.kept: dict[str, Any] = {}
        self.bench: Any = None
        self.frontend: Any = None
        self.shapes: dict[str, Any] = {}
        self.full_path = tmp / "unloaded.py"
        self.cost: dict[str, Any] | None = None  # the task's bytes and FLOPs, counted once (roofline)
        self.compiled: Any = None  # the reference under torch.compile, built once (speedup_compile)
        precision.watch_switches()  # before anything untrusted is imported
        self.compile_error: str | None = None
        self.work_trace: WorkTrace | None = None  # the last recorded trial (work_trace.py), for `program`
        self.handlers = own_handlers()  # put back after each call into user code (`calm`)
        if device == "cpu":  # the interpreter accepts what a GPU compiler rejects: compile for a GPU too
            from .frontend import Frontend

            self.frontend = Frontend()

    # -- loop --------------------------------------------------------------------------------------
    def serve(self) -> None:
        launches.install()
        self.watch = StuckWatch(sys.stderr, WATCHDOG_LEAD_S)
        while True:
            try:
                req, bufs = wire.recv(self.conn, MAX_FROM_REFEREE)
            except (EOFError, OSError):
                return
            op = req.get("op")
            if op == "exit":
                return
            self.watch.arm(req.get("deadline_s"))
            out: list[bytes | memoryview] = []
            trace = OpTrace(req.get("trace"))  # the referee traces where time goes (runners.OP_TRACE_ENV)
            try:
                reply = trace.run(getattr(self, f"op_{op}"), req, bufs, out)
            except wire.WireError as exc:
                reply, out = {"internal": f"bad request: {exc}"}, []
            except Exception as exc:  # noqa: BLE001 - e.g. the profiler failing: an answer, not a dead runner
                reply, out = {"internal": f"{type(exc).__name__}: {safe_str(exc)[:300]}"}, []
            except BaseException as exc:  # noqa: BLE001 - only user code raises these (classify.escaped)
                reply, out = escaped(exc, self.role, self.file, self.handlers), []
            finally:
                self.watch.disarm()
                quiet(self.handlers)  # nothing user code armed goes off while the runner waits or answers
            trace.report(reply)
            wire.send(self.conn, reply, out)
            if reply.get("poisoned"):
                os._exit(3)

    def _error(self, exc: BaseException, stage: str) -> dict[str, Any]:
        quiet(self.handlers)  # a timer of the user's would interrupt the classifying
        c = classify(exc, stage, self.file)
        return {"verdict": c.verdict.value, "error": c.error.model_dump(), "poisoned": c.poisoned,
                "oom": out_of_memory(exc)}

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    # -- loading and building ------------------------------------------------------------------------
    def op_load(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Import the module (task reference or candidate) from the private temporary directory."""
        self.role = req["role"]
        take_kernel_files(req, bufs)  # what earlier runs of this same source compiled: before any import
        path, self.full_path = self.tmp / f"{req['module']}.py", self.tmp / f"{req['module']}_full.py"
        self.shapes = dict(req.get("shapes") or {}) if self.role == "ref" else {}
        path.write_text(source := source_with_constants(req["source"], self.shapes))  # derived constants follow
        self.full_path.write_text(req["source"])  # full-size shapes for the meta device (op_meta, op_cost)
        self.file = CandidateFile(str(path), source)
        try:
            self.module = import_file(req["module"], path)
        except BaseException as exc:  # noqa: BLE001 - user code
            return self._error(exc, STAGE_IMPORT)
        if self.role == "cand":
            if not isinstance(getattr(self.module, "ModelNew", None), type):
                return {"verdict": "compile_error", "error": {
                    "exception": "MissingModelNew", "message": "the candidate does not define class ModelNew "
                    "(a drop-in for the task's Model, with the same constructor and forward signatures)"}}
            return {"ok": True}
        apply_shapes(self.module, self.shapes)
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.module, name):
                return {"ref_error": f"the reference does not define {name}; a KernelBench task needs "
                        "`class Model(nn.Module)`, `def get_inputs()` and `def get_init_inputs()`"}
        try:
            with torch.device(self.device):
                self.init_inputs = list(self.module.get_init_inputs())
        except BaseException as exc:  # noqa: BLE001
            return self._ref_error("get_init_inputs()", exc)
        return {"ok": True, "init_inputs": wire.encode_value(self.init_inputs, out)}

    def _ref_error(self, what: str, exc: BaseException) -> dict[str, Any]:
        quiet(self.handlers)  # a timer of the task's would interrupt the describing
        return {"ref_error": reference_error(what, exc, self.file), "oom": isinstance(exc, torch.OutOfMemoryError)}

    def op_build(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Construct the model under the evaluation's seed, in the mode its constructor leaves it in."""
        if self.role == "cand":
            self.init_inputs = list(wire.decode_value(req["init_inputs"], bufs))
        cls = self.module.ModelNew if self.role == "cand" else self.module.Model
        precision.pin_strict()
        flags = precision.snapshot()
        try:
            seeding.manual_seed(int(req["seed"]))
            with torch.device(self.device):
                model = cls(*self.init_inputs)
            if isinstance(model, torch.nn.Module):
                model = model.to(self.device)  # never .eval(): BatchNorm in training mode uses batch statistics
            self._sync()
        except BaseException as exc:  # noqa: BLE001
            if self.role == "ref":
                return self._ref_error("Model(*get_init_inputs())", exc)
            return self._error(exc, STAGE_BUILD)
        if req.get("stash"):  # a second model (checks/second_shapes.py): the first waits, for `unstash`
            self.stashed = self.model
        self.model = model
        changed = precision.changed_flags(flags, precision.snapshot())
        precision.restore(flags)
        return {"ok": True, "flags": changed, "state": state_index(model)}

    def op_unstash(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Put back the model a `stash` build set aside."""
        self.model, self.stashed = self.stashed, None
        return {"ok": True}

    def op_perturb(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Perturb the named parameters and constant buffers (checks/perturbation.py), alike in both models."""
        keys = {str(k): str(v) for k, v in dict(req["keys"]).items()}
        count = perturb(self.model, int(req["seed"]), keys)
        self._sync()
        return {"perturbed": count}

    def op_state(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The reference's parameters and buffers by name (for the copied line-up)."""
        state = self.model.state_dict() if isinstance(self.model, torch.nn.Module) else {}
        packs: list[Any] = []
        self.kept["state"] = (state, packs)
        return {"names": list(state), "values": wire.encode_value(list(state.values()), out, packs)}

    def op_load_state(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Copy the reference's parameters into ModelNew where names and shapes match."""
        values = wire.decode_value(req["values"], bufs)
        if not isinstance(self.model, torch.nn.Module):
            return {"copied": [], "skipped": list(req["names"])}
        mine = self.model.state_dict()
        copied, skipped = [], []
        with torch.no_grad():
            for name, value in zip(req["names"], values):
                target = mine.get(name)
                if isinstance(target, torch.Tensor) and target.shape == value.shape:
                    target.copy_(value)
                    copied.append(name)
                else:
                    skipped.append(name)
        self._sync()
        return {"copied": copied, "skipped": skipped}

    # -- running -----------------------------------------------------------------------------------
    def op_make(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Reference: fresh inputs for each seed (drawn on the device) and the reference's outputs. Sets
        drawn earlier under the same key go first (the referee has let go of them), and the device is
        waited for once, after the last set (an asynchronous failure still surfaces here)."""
        key = str(req["key"])
        for stale in (key, f"{key}/packs", f"{key}/outputs"):
            self.kept.pop(stale, None)
        sets, scaled, labels = [], req.get("scaled") or (), {}
        for j, seed in enumerate(req["seeds"]):
            seeding.manual_seed(int(seed))
            try:
                with torch.device(self.device):
                    inputs = self.module.get_inputs()
                if not isinstance(inputs, (list, tuple)):
                    return {"ref_error": f"the reference's get_inputs() returned {type(inputs).__name__}, not a list"}
                inputs = on_device(inputs, self.device, req.get("host_values"))  # the replay's: host_inputs.py
                result, forward = None, lambda xs: self._forward_ref(_guarded(xs), req.get("mode", "strict"), sync=False)
                if j in scaled:  # the off-distribution trial (checks/off_distribution.py)
                    inputs, result, labels[str(j)] = draw_off_distribution(inputs, forward)
                elif req.get("outputs", True):
                    result = forward(inputs)
            except BaseException as exc:  # noqa: BLE001
                return self._ref_error("get_inputs()/forward", exc)
            sets.append((inputs, result))
        try:
            self._sync()
        except BaseException as exc:  # noqa: BLE001
            return self._ref_error("get_inputs()/forward", exc)
        self.kept[key] = sets
        packs: list[Any] = []
        self.kept[f"{key}/packs"] = packs
        both = wire.encode_value([[list(i), o] for i, o in sets], out, packs)["list"]
        return {"sets": [{"inputs": pair["list"][0], "output": pair["list"][1]} for pair in both], "scaled": labels}

    def op_outputs(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Reference: its outputs for the kept sets the referee picked after a timed block (by index, each
        once). Its own copies of the inputs are used: the candidate was lent the referee's, never these."""
        sets = self.kept[str(req["key"])]
        picked = req.get("indices")
        if not isinstance(picked, list) or not all(type(i) is int and 0 <= i < len(sets) for i in picked):
            return {"internal": "bad indices for the reference's outputs"}
        wanted = sorted(set(picked))
        results = []
        try:
            for i in wanted:
                results.append(self._forward_ref(_guarded(sets[i][0]), "strict", sync=False))
            self._sync()
        except BaseException as exc:  # noqa: BLE001
            return self._ref_error("forward", exc)
        packs: list[Any] = []
        self.kept[f"{req['key']}/outputs"] = (results, packs)
        return {"indices": wanted, "outputs": wire.encode_value(results, out, packs)["list"]}

    def _forward_ref(self, inputs: list[Any], mode: str, sync: bool = True) -> Any:
        precision.pin_tf32() if mode == "tf32" else precision.pin_strict()
        with torch.no_grad():
            result = self.model(*inputs)
        calm(self.handlers)
        if sync:
            self._sync()
        precision.pin_strict()
        return result

    def op_rerun(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Reference: the outputs again for kept input sets (determinism probe)."""
        sets = self.kept[str(req["key"])]
        try:
            outs = [self._forward_ref([x.clone() if isinstance(x, torch.Tensor) else x for x in i], "strict")
                    for i, _ in sets]
        except BaseException as exc:  # noqa: BLE001
            return self._ref_error("forward", exc)
        packs: list[Any] = []
        self.kept[str(req["key"]) + "/rerun"] = (outs, packs)
        return {"outputs": wire.encode_value(outs, out, packs)["list"]}

    def op_forward(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Candidate: one call per lent input set, in order, stopping at the first failure; the outputs
        stay alive until `release` (the referee maps them)."""
        sets = [list(s) for s in wire.decode_value(req["sets"], bufs)]
        results, kept = [], []
        for i, inputs in enumerate(sets):
            decoy = with_decoy_first(inputs, lambda x: self._forward_one(x, False)) if i in (req.get("reuse") or ()) \
                else None  # an output cache keyed on a buffer's address answers the next call wrongly
            result, reply = (None, decoy) if decoy is not None else self._forward_one(inputs, bool(req.get("record")))
            kept.append(result if "verdict" not in reply else None)
            results.append(reply)
            if "verdict" in reply:
                break
        packs: list[Any] = []
        self.kept["out"] = (kept, packs)
        try:
            refuse_shared(kept)
            encoded = wire.encode_value(kept, out, packs)["list"]
        except Exception as exc:  # noqa: BLE001 - e.g. an output that is a view of a lent input
            return {"results": [{**results[0], "outputs": None, "unsendable": unsendable_reason(exc)}]}
        for reply, enc in zip(results, encoded):
            reply["outputs"] = enc
        if self.device == "cpu" and req.get("check_inputs"):  # no shared memory: the referee compares them itself
            for reply, inputs in zip(results, sets):
                reply["inputs_after"] = wire.encode_value(inputs, out)
        return {"results": results}

    def _forward_one(self, inputs: list[Any], record: bool) -> tuple[Any, dict[str, Any]]:
        """One call; with `record`, every trial alike, it is recorded for the replay (work_trace.py)."""
        before = precision.snapshot()
        recorder = self.frontend.recorder() if self.frontend is not None else None
        trace = WorkTrace(inputs) if record else None

        def before_launch(kernel: Any, args: tuple, kwargs: dict) -> None:
            if recorder is not None:
                recorder(kernel, args, kwargs)
            if trace is not None:
                trace.before(kernel, args, kwargs)

        def after_launch(kernel: Any, args: tuple, kwargs: dict) -> None:
            if recorder is not None and launches.raised():
                recorder.drop_last()
            if trace is not None:
                trace.after(kernel, args, kwargs)

        launches.begin(self.module.__name__, recorder=before_launch, after=after_launch)
        precision.watching(True)
        try:
            with torch.no_grad(), trace if trace is not None else contextlib.nullcontext():
                result = self.model(*inputs)
            calm(self.handlers)  # before the judge's own checks below run in this process
            self._sync()
        except BaseException as exc:  # noqa: BLE001
            launches.end()
            precision.watching(False)
            return None, self._error(exc, STAGE_RUN)
        names = launches.end()
        flags = precision.changed_flags(before, precision.snapshot()) + precision.watching(False)
        precision.restore(before)
        reply: dict[str, Any] = {"launched": names, "flags": flags}
        reply["aliased"] = aliased_output(result, inputs) is not None  # outputs travel as copies: only here is it seen
        if trace is not None:
            trace.finish(result)
            self.work_trace = trace
        if recorder is not None:
            problem = self.frontend.check(recorder)
            if problem is not None:
                reply.update(self._error(problem, STAGE_RUN))
                reply["frontend"] = True
            elif self.frontend.unavailable is not None:
                reply["unconfirmed"] = f"the GPU compiler front-end check could not run ({self.frontend.unavailable})"
        return result, reply

    def op_profile(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """GPU: device time by kernel name of `runs` calls under torch.profiler (evidence, reported as-is);
        with `detail`, after one warm call, every event for the profile digest (profile_digest.collect)."""
        from torch.profiler import ProfilerActivity, profile, record_function

        from .profile_digest import CALL_MARK, collect

        if "key" in req:  # the reference profiles on an input set it drew itself
            inputs = list(self.kept[str(req["key"])][0][0])
        else:
            inputs = list(wire.decode_value(req["inputs"], bufs))
        detail, runs = bool(req.get("detail")), max(1, min(int(req.get("runs", 1)), 20))
        if detail:  # Triton's JIT compile and autotuning are not what a profile is asked about
            with torch.no_grad():
                self.model(*inputs)
            torch.cuda.synchronize()
        activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if detail else [ProfilerActivity.CUDA]
        launches.begin(self.module.__name__)
        try:
            with profile(activities=activities) as prof, torch.no_grad():
                for _ in range(runs):
                    with record_function(CALL_MARK) if detail else contextlib.nullcontext():
                        self.model(*inputs)
                        torch.cuda.synchronize()
        finally:
            launched = launches.end()
        return {**collect(prof, detail), "launched": launched[:32]}

    def op_kernel_files(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The compiled kernels of this run, for the referee to keep for later runs of the same source."""
        files = read_tree(kernel_cache_dir())
        out.extend(data for _, data in files)
        return {"names": [name for name, _ in files]}

    def op_release(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Drop what was kept for the referee (`only`: one key). With `keep_cache` (mid-evaluation) the allocator
        keeps its cache for the next step's allocations of the same sizes, and no memory figure is sent."""
        if req.get("only"):  # the key and what was kept with it (`key/packs`, `key/outputs`)
            only = str(req["only"])
            for key in [k for k in self.kept if k == only or k.startswith(only + "/")]:
                del self.kept[key]
        else:
            self.kept.clear()
        if req.get("last"):  # the runner is killed next (runners.let_go): the work trace holds lent inputs
            self.work_trace = None  # (no cycle may hold them: a collection here cost 150-240 ms, 2026-12-07-i)
        if self.device != "cuda":
            return {"ok": True, "reserved": 0}
        if req.get("keep_cache"):  # mid-evaluation: the next step allocates the same sizes again
            give_back(None)
            return {"ok": True}
        give_back(KEEP_CACHED_BYTES)  # a cached reference must hold only what it uses, not its peak
        return {"ok": True, "reserved": torch.cuda.memory_reserved()}


def _guarded(inputs: list[Any]) -> list[Any]:
    """What the reference's forward is given: copies of inputs below CLONE_BYTES (it may write them, and the
    kept originals must stay as drawn); larger inputs as they are (a copy could run the device out of memory)."""
    return [cloned(x) for x in inputs] if nbytes(inputs) < CLONE_BYTES else list(inputs)
