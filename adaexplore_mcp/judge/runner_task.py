"""The reference runner's task-level requests: the task's cost for the roofline, the reference under
torch.compile, and full-size shapes on the meta device. Each uses the task's file at full size
(`full_path`: the source as given, without the small shapes the evaluation runs at)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..errors import safe_str
from ..tasks.format import import_file
from . import precision, wire
from .checks.measured_precision import MAX_BYTES, float64_outputs
from .compare import tensor_specs


class TaskOps:
    """Mixed into the Runner (runner.py), which holds the loaded module, init inputs and device."""

    module: Any
    model: Any
    kept: dict[str, Any]
    init_inputs: list[Any]
    device: str
    shapes: dict[str, Any]
    full_path: Path
    cost: dict[str, Any] | None
    compiled: Any
    compile_error: str | None
    _sync: Callable[[], None]

    def op_cost(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Reference: the task's minimum bytes and FLOPs at full size (roofline.count_cost), counted once
        per process: on torch's meta device (no memory, no compute) where the task allows, else (full
        shapes only) on one real input set with a model of its own (the evaluation's is not touched)."""
        from .roofline import count_task

        if self.cost is None:
            self.cost = count_task(self.module, self.full_path, self.init_inputs, self.device, small=bool(self.shapes))
        return self.cost

    def op_compile(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Reference: with `build`, the task's Model under torch.compile, once per process, warmed on one input
        set. A model of its own, built under a fixed seed: speed does not depend on parameter values, and the
        evaluation's model stays untouched. Without `build`: whether it is ready."""
        if self.compiled is not None or self.compile_error is not None or not req.get("build"):
            return {"ready": self.compiled is not None, "compile_error": self.compile_error}
        import torch._inductor.config as inductor_config

        started = time.perf_counter()
        inductor_config.compile_threads = 1  # no pool of compile-worker processes inside the sandbox
        precision.pin_strict()
        try:
            torch.manual_seed(0)
            with torch.device(self.device):
                model = self.module.Model(*self.init_inputs)
                inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in self.module.get_inputs()]
            model = model.to(self.device) if isinstance(model, torch.nn.Module) else model
            mode = str(req.get("mode") or "default")
            compiled = torch.compile(model, mode=None if mode == "default" else mode)
            with torch.no_grad():
                for _ in range(2):  # the second call catches a recompile the first one's guards trigger
                    compiled(*inputs)
            self._sync()
        except BaseException as exc:  # noqa: BLE001 - task code, or inductor
            self.compile_error = f"{type(exc).__name__}: {safe_str(exc)[:300]}"
            if self.device == "cuda":
                torch.cuda.empty_cache()
            return {"ready": False, "compile_error": self.compile_error}
        self.compiled = compiled
        return {"ready": True, "compile_s": round(time.perf_counter() - started, 3)}

    def op_meta(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Full-size input/output specs on torch's meta device (no data), for a task probed at small shapes."""
        try:
            module = import_file(self.module.__name__ + "_meta", self.full_path)
            with torch.device("meta"):
                model = module.Model(*module.get_init_inputs())
                inputs = list(module.get_inputs())
                with torch.no_grad():
                    result = model(*inputs)
        except Exception as exc:  # noqa: BLE001 - some ops lack meta kernels
            return {"error": type(exc).__name__}
        outs = result if isinstance(result, (list, tuple)) else [result]
        return {"inputs": tensor_specs(inputs), "outputs": tensor_specs(outs)}

    def op_float64(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Reference: its outputs for the first kept set of `key`, computed in float64 (measured precision:
        checks/measured_precision.py). A set or model too large for a float64 copy is skipped, and said so."""
        inputs = list(self.kept[str(req["key"])][0][0])
        if sum(x.numel() * 8 for x in inputs if isinstance(x, torch.Tensor)) > MAX_BYTES:
            return {"skipped": "the inputs are too large for a float64 copy"}
        try:
            result = float64_outputs(self.model, inputs)
            self._sync()
        except Exception as exc:  # noqa: BLE001 - an operator without a float64 kernel
            return {"skipped": f"the reference does not run in float64 ({type(exc).__name__})"}
        if result is None:
            return {"skipped": "the model is too large for a float64 copy"}
        packs: list[Any] = []
        self.kept[f"{req['key']}/float64"] = (result, packs)
        return {"outputs": wire.encode_value(result, out, packs)}
