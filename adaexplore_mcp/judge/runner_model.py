"""What the two runners that hold a model share (the reference's and a candidate's): the source written into
the private scratch directory, the model built under the evaluation's seed, its constant parameters perturbed,
its timing (runner_timing.py) and its profile. The role classes add what only they answer."""

from __future__ import annotations

import contextlib
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from ..tasks.format import source_with_constants
from . import launches, precision, seeding, wire
from .checks.perturbation import perturb, state_index
from .classify import STAGE_BUILD, CandidateFile
from .kernel_cache import take_kernel_files
from .runner import Runner
from .runner_timing import TimingOps


class ModelRunner(TimingOps, Runner):
    """A runner holding one model (`model`; a `stash` build sets the first aside) and its init inputs."""

    def __init__(self, conn: Connection, device: str, tmp: Path) -> None:
        super().__init__(conn, device, tmp)
        self.init_inputs: list[Any] = []
        self.model: Any = None
        self.stashed: Any = None
        self.bench: Any = None
        self.shapes: dict[str, Any] = {}
        self.full_path = tmp / "unloaded.py"
        self.compiled: Any = None  # the reference under torch.compile, built once (speedup_compile)

    def _write_source(self, req: dict, bufs: list[bytes]) -> Path:
        """The module's source in the private temporary directory (at the runner's shapes; the full-size one
        beside it for the meta device), after what earlier runs of this same source compiled."""
        take_kernel_files(req, bufs)  # before any import
        path, self.full_path = self.tmp / f"{req['module']}.py", self.tmp / f"{req['module']}_full.py"
        path.write_text(source := source_with_constants(req["source"], self.shapes))  # derived constants follow
        self.full_path.write_text(req["source"])  # full-size shapes for the meta device (op_meta, op_cost)
        self.file = CandidateFile(str(path), source)
        return path

    def _model_class(self, req: dict, bufs: list[bytes]) -> Any:
        """The class `build` constructs (and, for a role given them, the init inputs it takes)."""
        raise NotImplementedError

    def _user_error(self, what: str, exc: BaseException, stage: str) -> dict[str, Any]:
        """How this role reports an exception its user code raised in `what` (at `stage`)."""
        raise NotImplementedError

    def op_build(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Construct the model under the evaluation's seed, in the mode its constructor leaves it in."""
        cls = self._model_class(req, bufs)
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
            return self._user_error("Model(*get_init_inputs())", exc, STAGE_BUILD)
        if req.get("stash"):  # a second model (checks/second_shapes.py): the first waits, for `unstash`
            self.stashed = self.model
        self.model = model
        changed = precision.changed_flags(flags, precision.snapshot())
        precision.restore(flags)
        return {"ok": True, "flags": changed, "state": state_index(model)}

    def op_perturb(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Perturb the named parameters and constant buffers (checks/perturbation.py), alike in both models."""
        keys = {str(k): str(v) for k, v in dict(req["keys"]).items()}
        count = perturb(self.model, int(req["seed"]), keys)
        self._sync()
        return {"perturbed": count}

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

    REQUESTS = {**Runner.REQUESTS, "build": op_build, "perturb": op_perturb, "profile": op_profile,
                "time": TimingOps.op_time, "timed_outputs": TimingOps.op_timed_outputs}
