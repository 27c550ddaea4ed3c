"""Replay a recorded forward call (record.py) in a fresh runner where no candidate Python runs.

The runner is a spare candidate runner that never imports the candidate's module; its kernels are rebuilt
from the source the referee holds (kernels.py). Then the program runs on inputs the referee lends
(new ones, drawn for this), each run with fresh copies of the call's constants:

- as recorded, on the first set: it must compute the reference's output (the referee compares). A value the
  call read back to the host (`.item()`) that comes out differently here is noted: when the output is then
  wrong, the call's decisions (or a kernel argument) depended on its inputs, and the rejection says so;
- when the referee lends a second set (the task's output tells the two apart): a capture run on it, as
  recorded (its output must match too), keeping what every launch of the candidate's kernels wrote; then a
  run on the first set in which each launch is replaced by those writes. Its output must be wrong: the
  kernels' results must carry the work. A kernel that writes a constant (a zero added to a result PyTorch
  computed, a gate) or nothing at all fails this, whatever it does with the memory it is given;
- otherwise (a large set, or a task whose output barely depends on its inputs), a run with every launch
  skipped, whose output must be wrong.

Memory the program allocated with `torch.empty*` is filled with NaN (floats) or the largest value (integers)
in every run, so a skipped kernel cannot leave a plausible result behind and a kernel that reads memory it
never wrote shows. The work policy (work_policy.py) is checked on the data flow (flow.py) of the capture run
(which knows what each launch changed), or of the run as recorded when there is none, here, where the candidate
cannot see it.

On the CPU interpreter a kernel's body runs as Python in this process (on a GPU it is compiled), so there
a hostile kernel body can still reach the replay: the known limit of judging without a GPU.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ..compare import MAX_NESTING as MAX_INPUT_NESTING
from ..byte_values import storage_bytes, storage_key
from ..device_memory import out_of_memory
from ..host_scalars import evaluate, host_reads
from .inputs import EMPTY_OPS, RESIZE_OPS, LentInputs, fill_unwritten, plain
from .kernels import ReplayError, _op, _scalar, _torch_attr, build_kernels, descriptor, option_value, triton_dtype
from ..seeding import manual_seed
from ..tensor_args import launch_tensors
from ..wire import span_bytes
from .flow import WorkFlow

# ================================================================================================ running

REPLAY_SEED = 20261206
CAPTURE_MAX_BYTES = 4 << 30  # what the capture run may keep of its kernels' writes; beyond, work_not_replayable


class _Writes(NamedTuple):
    """What one launch changed in one argument's storage (of `size` bytes), for the substituted run: at positions
    (`at` a tensor of them, `changed` None), or in a span (`at` a slice) where `changed` says which bytes."""

    pos: int  # which tensor argument of the launch
    size: int
    at: torch.Tensor | slice
    data: torch.Tensor
    changed: torch.Tensor | None = None


class Run:
    """One run of a program on one device, in one of four modes:

    - `full`: as recorded (values read back to the host are compared with the record);
    - `capture`: as recorded, keeping what each launch of the candidate's kernels changed (every byte of
      every argument's storage), and telling the data flow which storages each launch changed;
    - `substitute`: no launch runs; each one's writes are replaced by those a capture run made on other
      inputs (`captured`), so the candidate's kernels contribute what they computed for other inputs;
    - `skip`: no launch runs and nothing is written in their place.

    With `flow`, the run's data flow is followed for the work policy (flow.py)."""

    def __init__(self, program: dict, kernels: dict[str, Any], device: str, mode: str = "full",
                 flow: WorkFlow | None = None, captured: dict[int, list[_Writes]] | None = None) -> None:
        self.program, self.kernels, self.device, self.mode, self.flow = program, kernels, device, mode, flow
        self.vals: dict[int, torch.Tensor] = {}
        self.host_differs: str | None = None
        self.reads: dict[Any, Any] = {}  # values read back to the host, by read (host_scalars.py)
        self.captured: dict[int, list[_Writes]] = {} if captured is None else captured
        self.captured_bytes = 0
        self.overflow = False  # the capture outgrew CAPTURE_MAX_BYTES and was dropped

    @property
    def skip(self) -> bool:
        return self.mode in ("skip", "substitute")

    def value(self, d: Any) -> Any:
        if isinstance(d, dict):
            if "t" in d:
                slot = d["t"]
                if slot not in self.vals:
                    raise ReplayError(f"the program uses tensor slot {str(slot)[:20]} before it exists")
                return self.vals[slot]
            if "l" in d or "tu" in d:
                items = [self.value(x) for x in d.get("l", d.get("tu")) or []]
                return items if "l" in d else tuple(items)
            if "float" in d:
                return _scalar(d)
            if "hexpr" in d:  # a launch argument computed from values read back: with this run's (host_scalars.py)
                return evaluate(d["hexpr"], self.reads, _scalar)
            if "dtype" in d:
                return _torch_attr(d["dtype"], torch.dtype)
            if "device" in d:
                return torch.device("cpu" if d["device"] == "cpu" else self.device)
            if "tl_dtype" in d:
                return triton_dtype(d["tl_dtype"])
            if "enum" in d:
                return _torch_attr(d["enum"], (torch.memory_format, torch.layout))
            if "triton_obj" in d:  # a TensorDescriptor: rebuilt around the replay's own tensor
                fields = d.get("fields") if isinstance(d.get("fields"), dict) else {}
                return descriptor(d["triton_obj"], {str(k): self.value(v) for k, v in fields.items()})
            raise ReplayError(f"bad argument in the program: {str(d)[:60]}")
        return d

    def bind(self, d: Any, got: Any, where: str) -> None:
        if isinstance(d, dict) and "t" in d:
            if not isinstance(got, torch.Tensor):
                raise ReplayError(f"{where} returned {type(got).__name__}, recorded as a tensor")
            self.vals[d["t"]] = got  # dense: `_aten` checked it (`plain`) before the data flow read it
        elif isinstance(d, dict) and "l" in d:
            if not isinstance(got, (list, tuple)) or len(got) != len(d["l"]):
                raise ReplayError(f"{where} returned a different number of results than recorded")
            for sub, g in zip(d["l"], got):
                self.bind(sub, g, where)
        elif isinstance(d, dict) and "v" in d:
            self.reads[d.get("h")] = got
            if self.mode == "full" and self.host_differs is None and not _same(_scalar(d["v"]), got):
                self.host_differs = f"{where} returned {str(got)[:40]} here, {str(_scalar(d['v']))[:40]} when recorded"

    def execute(self, inputs: list[Any], constants: list[torch.Tensor]) -> Any:
        manual_seed(REPLAY_SEED)  # every run draws the same random numbers: none can tell two runs apart by them
        # Inputs are not copied (a large task's fill the device): runs that must see them untouched go first,
        # and a program that writes its inputs in place (the trials rejected the real call for that) only
        # spoils its own later runs. Constants are the caller's to give fresh to each run.
        self._bind_inputs(self.program.get("inputs") or [], inputs)
        for slot, c in zip(self.program.get("constants") or [], constants):
            self.vals[slot] = c
        with torch.no_grad():
            for i, step in enumerate(self.program.get("steps") or []):
                if "op" in step:
                    self._aten(step, i)
                elif "alias" in step:
                    self._alias(step)
                elif self.mode == "substitute":
                    self._substitute(step, i)
                elif not self.skip:
                    self._launch(step, i)
        return self.value(self.program.get("output"))

    def _bind_inputs(self, slots: list[Any], inputs: Any, depth: int = 0) -> None:
        """The inputs into their slots; a list of slots for a list of tensors (a task's input may be one)."""
        for slot, x in zip(slots, inputs):
            if isinstance(slot, int) and isinstance(x, torch.Tensor):
                self.vals[slot] = x
            elif isinstance(slot, list) and isinstance(x, (list, tuple)) and depth < MAX_INPUT_NESTING:
                self._bind_inputs(slot, x, depth + 1)

    def _aten(self, step: dict, i: int) -> None:
        where = f"operator {str(step['op'])[:60]} (step {i})"
        args = self.value(step.get("args") or {"l": []})
        kwargs = {str(k): self.value(v) for k, v in (step.get("kwargs") or {}).items()}
        op = _op(step["op"])
        grown = args[0].numel() if step["op"] in RESIZE_OPS and args and isinstance(args[0], torch.Tensor) else None
        got = op(*args, **kwargs)
        for t in got if isinstance(got, (list, tuple)) else [got]:
            if isinstance(t, torch.Tensor):
                plain(t, where)  # before the data flow reads its bytes
        if step["op"] in EMPTY_OPS and isinstance(got, torch.Tensor):
            fill_unwritten(got)
        elif grown is not None and isinstance(got, torch.Tensor) and got.numel() > grown:
            if not got.is_contiguous():  # memory a resize exposes is as unwritten as torch.empty's: it could hold
                raise ReplayError(f"{where} grew a strided tensor")  # an earlier run's values
            fill_unwritten(got.view(-1)[grown:])
        if self.flow is not None:
            out = step.get("out")
            self.flow.op(str(step["op"]), op, args, kwargs, got, out.get("h") if isinstance(out, dict) else None)
        self.bind(step.get("out"), got, where)

    def _alias(self, step: dict) -> None:
        """A tensor the call made over another's memory without an operator (`.data`, `as_subclass`)."""
        base = self.value({"t": step.get("alias")})
        dtype = _torch_attr(step.get("dtype"), torch.dtype)
        size, stride, offset = step.get("size"), step.get("stride"), step.get("offset")
        ints = [*(size or []), *(stride or []), offset]
        if not all(type(v) is int and v >= 0 for v in ints) or len(size or []) != len(stride or []) or \
                len(size or []) > 16:
            raise ReplayError(f"a bad alias in the program: {str(step)[:80]}")
        needed = span_bytes(size, stride, offset, torch.empty((), dtype=dtype).element_size())
        if needed > base.untyped_storage().nbytes():
            raise ReplayError(f"an alias in the program reaches past its tensor's memory ({needed} bytes)")
        view = torch.empty(0, dtype=dtype, device=base.device)
        self.vals[step.get("slot")] = plain(view.set_(base.untyped_storage(), offset, size, stride), "an alias")

    def _launch_parts(self, step: dict) -> tuple[str, Any, list, dict]:
        name = str(step.get("launch"))
        kernel = self.kernels.get(name)
        grid = step.get("grid")
        if kernel is None or not isinstance(grid, list) or not 1 <= len(grid) <= 3:
            raise ReplayError(f"the program's launch of {name[:60]!r} cannot be replayed (no kernel or no grid)")
        args = self.value(step.get("args") or {"l": []})
        kwargs = {str(k): self.value(v) for k, v in (step.get("kwargs") or {}).items()}
        params = set(getattr(kernel, "arg_names", None) or [])
        for key, v in kwargs.items():  # an option a string would reach a compiler's command line (`ptx_options`)
            if key not in params and not option_value(v):
                raise ReplayError(f"the launch of {name[:60]!r} passes the option {key[:40]!r} as a "
                                  f"{type(v).__name__}: launch options are numbers")
        return name, kernel, args, kwargs

    def _launch(self, step: dict, i: int) -> None:
        _, kernel, args, kwargs = self._launch_parts(step)
        watched = self._watched(args, kwargs) if self.mode == "capture" and not self.overflow else None
        before = [storage_bytes(t).clone() for _, t in watched] if watched is not None else None
        kernel.run(*args, grid=tuple(int(g) for g in step["grid"]), warmup=False, **kwargs)
        changed_storages: set[int] | None = None
        if watched is not None and before is not None:
            changed_storages = set()
            for (pos, t), old in zip(watched, before):
                now = storage_bytes(t)
                changed = old != now
                if bool(changed.any()):
                    changed_storages.add(storage_key(t))
                    self._keep(i, pos, now, changed)
            del before
        if self.flow is not None:
            reads = host_reads([step.get("args"), step.get("kwargs")])
            self.flow.launch(args, kwargs, None if self.overflow else changed_storages, reads)

    def _watched(self, args: Any, kwargs: dict) -> list[tuple[int, torch.Tensor]]:
        """The launch's tensor arguments whose storage a capture watches: one per storage, inputs included (a
        constant written into an input, and taken back out by PyTorch, is a gate too)."""
        seen: set[int] = set()
        watched = []
        for pos, t in enumerate(launch_tensors(args, kwargs)):
            key = storage_key(t)
            if key not in seen and t.untyped_storage().nbytes():
                seen.add(key)
                watched.append((pos, t))
        return watched

    def _keep(self, i: int, pos: int, now: torch.Tensor, changed: torch.Tensor) -> None:
        """Only the bytes the launch changed are put back in its place: PyTorch's own data in another part of the
        same storage stays this run's. Kept from the first changed byte to the last (a launch that writes one
        slice of a large buffer, a step of a loop, costs that slice, not the buffer), or as positions when they are
        scattered across it (a block of columns of a row-major output)."""
        lo, hi = _changed_span(changed)
        count = int(changed[lo:hi].sum())
        if 9 * count < 2 * (hi - lo):  # scattered (a column block of a row-major output): positions and bytes
            where = torch.nonzero(changed[lo:hi]).flatten() + lo
            kept = _Writes(pos, changed.numel(), where, now[where].clone())
            self.captured_bytes += 9 * count
        else:  # the span from the first changed byte to the last, and which of its bytes changed
            span = changed[lo:hi].clone()
            kept = _Writes(pos, changed.numel(), slice(lo, hi), torch.where(span, now[lo:hi], 0), span)
            self.captured_bytes += 2 * (hi - lo)
        if self.captured_bytes > CAPTURE_MAX_BYTES:
            self.overflow, self.captured = True, {}
            return
        self.captured.setdefault(i, []).append(kept)

    def _substitute(self, step: dict, i: int) -> None:
        """In place of launch `i`: write what it wrote in the capture run, byte for byte."""
        _, _, args, kwargs = self._launch_parts(step)
        tensors = launch_tensors(args, kwargs)
        for kept in self.captured.get(i, []):
            target = storage_bytes(tensors[kept.pos]) if kept.pos < len(tensors) else None
            if target is None or target.numel() != kept.size:
                raise ReplayError("the program's launches take other arguments on other inputs")
            if kept.changed is None:  # scattered: positions and their bytes
                target[kept.at] = kept.data
            else:
                part = target[kept.at]
                part.copy_(torch.where(kept.changed, kept.data, part))


def _changed_span(changed: torch.Tensor) -> tuple[int, int]:
    """From the first changed byte to the last, [lo, hi)."""
    flags = changed.to(torch.uint8)
    return int(flags.argmax()), changed.numel() - int(flags.flip(0).argmax())


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


class ReplayOps:
    """The runner's `replay_prepare` and `replay` ops (mixed into `runner.Runner`)."""

    device: str
    tmp: Path
    kept: dict[str, Any]

    def op_replay_prepare(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Kernel files from earlier runs of this source, then the kernels rebuilt from the source."""
        from .. import compile_guard
        from ..kernel_cache import take_kernel_files

        compile_guard.install()  # before any kernel of the candidate's is compiled here: its body stays Triton's
        # Memory no operator wrote is filled (NaN, or the largest integer) whoever allocates it: `prims::empty_strided`,
        # `empty.out` and their kin handed a run what the run before it had left there, and a forged program kept a
        # counter in it. Nondeterministic operators only warn here (the replay is not timed).
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
        take_kernel_files(req, bufs)
        program = req.get("program")
        if not isinstance(program, dict):
            return {"replay_error": "no program to replay"}
        try:
            self.kept["replay_kernels"] = build_kernels(str(req["source"]), dict(program.get("kernels") or {}),
                                                        str(req["module"]), self.tmp)
        except ReplayError as exc:
            return {"replay_error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - a kernel Triton will not jit
            return {"replay_error": f"rebuilding the kernels failed: {type(exc).__name__}: {str(exc)[:200]}",
                    "oom": out_of_memory(exc)}
        self.kept["replay_program"] = program
        return {"ok": True}

    def op_replay(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """The runs on the lent inputs; their outputs stay alive until `release` (the referee maps them).

        With a second input set: a capture run on it (its output, and what each launch wrote), then the
        substituted run and the run as recorded on the first set. Without: the skipped run, then the run as
        recorded. Every run gets fresh copies of the constants (a program must not carry state between them)."""
        from .. import wire

        program, kernels = self.kept.get("replay_program"), self.kept.get("replay_kernels")
        if program is None or kernels is None:
            return {"replay_error": "replay_prepare did not succeed"}
        sets = wire.decode_value(req["sets"], bufs)
        inputs, constants, other = sets[0], sets[1], (sets[2] if len(sets) > 2 else None)
        fresh = lambda: [c.clone() for c in constants]  # noqa: E731
        lent = LentInputs(inputs, constants, other)
        first = lambda: lent.fresh(inputs)  # noqa: E731 - the first set's aliases for one run
        capture: Run | None = None
        try:
            if other is not None:  # first: it may not touch the first set's inputs, which the others share
                known, other_run = fresh(), lent.fresh(other)
                capture = Run(program, kernels, self.device, "capture", flow=WorkFlow(other_run, known))
                other_out = capture.execute(other_run, known)
            if capture is not None and capture.overflow:  # never a weaker check: the candidate would choose it
                return {"replay_error": f"its launches changed memory that takes more than {CAPTURE_MAX_BYTES >> 30} GiB "
                        "to keep in one call (each launch's changed bytes, or the span from its first to its last "
                        "changed byte), more than the substitution check holds; fewer, larger launches keep less"}
            substituted = capture is not None
            checked = Run(program, kernels, self.device, "substitute" if substituted else "skip",
                          captured=capture.captured if substituted else None).execute(first(), fresh())
            if capture is not None:
                capture.captured = {}  # the writes are spent: let go of them before the last run
            known, first_run = fresh(), first()
            full = Run(program, kernels, self.device, "full",
                       flow=None if substituted else WorkFlow(first_run, known))
            got = full.execute(first_run, known)
            lent.check()
            if self.device == "cuda":
                torch.cuda.synchronize()
        except ReplayError as exc:
            return {"replay_error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - the candidate's kernels, on other inputs
            from ..compile_guard import cause

            refused = cause(exc)
            if refused is not None:
                return {"replay_error": f"a kernel's body reaches Python outside Triton's language while it compiles "
                        f"({str(refused)[:200]}); the replay compiles Triton's language only"}
            return {"replay_error": f"{type(exc).__name__}: {str(exc)[:300]}", "oom": out_of_memory(exc)}
        traced, traced_out = (capture, other_out) if substituted else (full, got)  # the run the data flow followed
        assert traced.flow is not None  # both runs above were given one
        findings = [f.as_json() for f in traced.flow.findings(traced_out)]
        packs: list[Any] = []
        outputs = [got, checked, *([other_out] if capture is not None else [])]
        self.kept["out"] = (outputs, packs)
        encoded = wire.encode_value(outputs, out, packs)["list"]
        return {"full": encoded[0], "checked": encoded[1], "other": encoded[2] if capture is not None else None,
                "check": "substituted" if substituted else "skipped", "host_differs": full.host_differs,
                "policy": findings}


__all__ = ["ReplayError", "ReplayOps", "Run", "build_kernels"]
