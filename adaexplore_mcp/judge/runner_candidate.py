"""A candidate's runner: it imports exactly one candidate, builds its ModelNew, runs the trials' calls on the
inputs the referee lends it (each recorded for the replay: replay/record.py), and is killed after the evaluation.
On the CPU every call's launches also go through the GPU compiler's front end (frontend/check.py): the interpreter
accepts what a GPU compiler rejects."""

from __future__ import annotations

import contextlib
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from ..tasks.format import import_file
from . import launches, precision, wire
from .checks.buffer_reuse import with_decoy_first
from .classify import STAGE_IMPORT, STAGE_RUN
from .compare import aliased_output, refuse_shared, unsendable_reason
from .runner_model import ModelRunner
from .user_signals import calm
from .replay import ProgramOps, WorkTrace


class CandidateRunner(ProgramOps, ModelRunner):
    """Role `cand`: one candidate's ModelNew, its trials' calls, and the last recorded call as a program."""

    role = "cand"

    def __init__(self, conn: Connection, device: str, tmp: Path) -> None:
        super().__init__(conn, device, tmp)
        self.work_trace: WorkTrace | None = None  # the last recorded trial (replay/record.py), for `program`
        self.frontend: Any = None
        if device == "cpu":  # the interpreter accepts what a GPU compiler rejects: compile for a GPU too
            from .frontend import Frontend

            self.frontend = Frontend()

    def _model_class(self, req: dict, bufs: list[bytes]) -> Any:
        self.init_inputs = list(wire.decode_value(req["init_inputs"], bufs))  # the reference's, as it drew them
        return self.module.ModelNew

    def _user_error(self, what: str, exc: BaseException, stage: str) -> dict[str, Any]:
        return self._error(exc, stage)

    def op_load(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Import the candidate's module; it must define class ModelNew."""
        path = self._write_source(req, bufs)
        try:
            self.module = import_file(req["module"], path)
        except BaseException as exc:  # noqa: BLE001 - user code
            return self._error(exc, STAGE_IMPORT)
        if not isinstance(getattr(self.module, "ModelNew", None), type):
            return {"verdict": "compile_error", "error": {
                "exception": "MissingModelNew", "message": "the candidate does not define class ModelNew "
                "(a drop-in for the task's Model, with the same constructor and forward signatures)"}}
        return {"ok": True}

    def op_unstash(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Put back the model a `stash` build set aside."""
        self.model, self.stashed = self.stashed, None
        return {"ok": True}

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
        """One call; with `record`, every trial alike, it is recorded for the replay (replay/record.py)."""
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

    REQUESTS = {**ModelRunner.REQUESTS, "load": op_load, "unstash": op_unstash, "load_state": op_load_state,
                "forward": op_forward, "program": ProgramOps.op_program}
