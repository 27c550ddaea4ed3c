"""The task's reference runner: it loads the task, draws every input set (trials, replay, timing) and computes
the reference's outputs, kept until the referee releases them. Cached by the referee, one per task and shapes,
across evaluations."""

from __future__ import annotations

from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from ..tasks.format import apply_shapes, import_file
from . import precision, seeding, wire
from .checks.off_distribution import draw_off_distribution
from .classify import STAGE_IMPORT, reference_error
from .compare import cloned, nbytes
from .host_inputs import on_device
from .runner_model import ModelRunner
from .runner_task import TaskOps
from .user_signals import calm, quiet

CLONE_BYTES = 1 << 30  # inputs below this are copied before the reference's forward (it may write them)


class ReferenceRunner(TaskOps, ModelRunner):
    """Role `ref`: the task's Model, its draws and outputs, its cost, compiled form and float64 run (TaskOps)."""

    role = "ref"

    def __init__(self, conn: Connection, device: str, tmp: Path) -> None:
        super().__init__(conn, device, tmp)
        self.cost: dict[str, Any] | None = None  # the task's bytes and FLOPs, counted once (roofline)
        self.compile_error: str | None = None

    def _model_class(self, req: dict, bufs: list[bytes]) -> Any:
        return self.module.Model

    def _user_error(self, what: str, exc: BaseException, stage: str) -> dict[str, Any]:
        return self._ref_error(what, exc)

    def _ref_error(self, what: str, exc: BaseException) -> dict[str, Any]:
        quiet(self.handlers)  # a timer of the task's would interrupt the describing
        return {"ref_error": reference_error(what, exc, self.file), "oom": isinstance(exc, torch.OutOfMemoryError)}

    def op_load(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Import the task's module at its shapes; its init inputs go back to the referee (for the candidate)."""
        self.shapes = dict(req.get("shapes") or {})
        path = self._write_source(req, bufs)
        try:
            self.module = import_file(req["module"], path)
        except BaseException as exc:  # noqa: BLE001 - user code
            return self._error(exc, STAGE_IMPORT)  # as any runner reports an import error
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

    def op_state(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The reference's parameters and buffers by name (for the copied line-up)."""
        state = self.model.state_dict() if isinstance(self.model, torch.nn.Module) else {}
        packs: list[Any] = []
        self.kept["state"] = (state, packs)
        return {"names": list(state), "values": wire.encode_value(list(state.values()), out, packs)}

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

    REQUESTS = {**ModelRunner.REQUESTS, "load": op_load, "state": op_state, "make": op_make, "outputs": op_outputs,
                "rerun": op_rerun, "cost": TaskOps.op_cost, "compile": TaskOps.op_compile, "meta": TaskOps.op_meta,
                "float64": TaskOps.op_float64}


def _guarded(inputs: list[Any]) -> list[Any]:
    """What the reference's forward is given: copies of inputs below CLONE_BYTES (it may write them, and the
    kept originals must stay as drawn); larger inputs as they are (a copy could run the device out of memory)."""
    return [cloned(x) for x in inputs] if nbytes(inputs) < CLONE_BYTES else list(inputs)
