"""Replay a recorded forward call (work_trace.py) in a fresh runner where no candidate Python runs.

The runner is a spare candidate runner that never imports the candidate's module. Its kernels are rebuilt
from the source the referee holds: each top-level `def` the program launched, decorators dropped (an
autotuner's or heuristic's choice is already in the recorded launch arguments), its signature checked to
evaluate nothing but names and constants, then `triton.jit`. The module-level values the kernels read come
from the program. Then the program runs twice on the inputs the referee lends (new ones, drawn for this):

- as recorded: it must compute the reference's output (the referee compares). A value the call read back
  to the host (`.item()`) that comes out differently here is noted: when the output is then wrong, the
  call's decisions (or a kernel argument) depended on its inputs, and the rejection says so;
- with every launch of the candidate's kernels skipped: the output must then be wrong, or the work was
  done by the operators around them.

Memory the program allocated with `torch.empty*` is filled with NaN (floats) or the largest value (integers)
in both runs, so a skipped kernel cannot leave a plausible result behind and a kernel that reads memory it
never wrote shows. The copy check of copy_trace.py runs on the first run's launches, here, where the
candidate cannot see it.

On the CPU interpreter a kernel's body runs as Python in this process (on a GPU it is compiled), so there
a hostile kernel body can still reach the replay: the known limit of judging without a GPU.
"""

from __future__ import annotations

import ast
import importlib
import math
import sys
import types
from pathlib import Path
from typing import Any

import torch

from .copy_trace import CopyTrace
from .wire import decode_float, span_bytes
from .work_trace import TRITON_MODULES

NAMESPACES = ("aten", "prims")
EMPTY_OPS = frozenset({"aten::empty.memory_format", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                       "aten::new_empty_strided", "aten::empty_permuted"})
_SIGNATURE_NODES = (ast.Constant, ast.Name, ast.Attribute, ast.Load, ast.UnaryOp, ast.USub, ast.Subscript, ast.Tuple)


class ReplayError(Exception):
    """The program cannot be replayed (the message is for the candidate's author)."""


# ================================================================================================ kernels

def _check_signature(node: ast.FunctionDef) -> None:
    """Defaults and annotations are evaluated when the `def` runs: only names and constants allowed."""
    exprs = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
    exprs += [a.annotation for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs] if a.annotation]
    exprs += [node.returns] if node.returns is not None else []
    for expr in exprs:
        if not all(isinstance(n, _SIGNATURE_NODES) for n in ast.walk(expr)):
            raise ReplayError(f"kernel {node.name}'s signature computes a value ({ast.unparse(expr)[:60]}): defaults "
                              "and annotations of a @triton.jit function must be constants or names")


def build_kernels(source: str, kernels: dict[str, Any], module_name: str, tmp: Path) -> dict[str, Any]:
    """The launched kernels (and the helpers they call), rebuilt from `source` with only their `def`s."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ReplayError(f"the candidate's source does not parse: {exc}") from None
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    lines = source.splitlines()
    kept = [""] * len(lines)  # every def at its own line: Triton's cache key counts its first line, so the
    for name in kernels:      # kernels the candidate's runner compiled (kernel_cache.py) are found, not rebuilt
        node = defs.get(name)
        if node is None:
            raise ReplayError(f"kernel {name!r} launched, but no function of that name is defined at the top level "
                              "of the candidate's source; define every @triton.jit kernel at module level")
        _check_signature(node)
        kept[node.lineno - 1:node.end_lineno] = lines[node.lineno - 1:node.end_lineno]
        if node.decorator_list:  # the key counts from the first decorator's line: a no-op one stands there
            first = node.decorator_list[0].lineno - 1
            kept[first] = lines[first][:len(lines[first]) - len(lines[first].lstrip())] + "@_replay_as_is"
    path = tmp / f"{module_name}_replay.py"
    path.write_text("\n".join(kept) + "\n")
    import triton
    import triton.language as tl

    module = types.ModuleType(f"{module_name}_replay")
    module.__file__ = str(path)
    module.__dict__.update(triton=triton, tl=tl, _replay_as_is=lambda fn: fn)
    sys.modules[module.__name__] = module
    later = _install_globals(kernels, defs, module)  # before the defs run: a default may read one
    exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # noqa: S102 - only checked defs
    for name in kernels:
        setattr(module, name, triton.jit(getattr(module, name), **_jit_options(defs[name])))
    for ref, target in later:  # other @jit functions, once they exist
        setattr(module, ref, getattr(module, target))
    return {name: getattr(module, name) for name in kernels}


def _install_globals(kernels: dict[str, Any], defs: dict[str, ast.FunctionDef], module: Any) -> list[tuple[str, str]]:
    """Each module-level value a kernel really reads; returns the references to other kernels, for later."""
    later = []
    for name, entry in kernels.items():
        reads = _global_reads(defs[name])
        for ref, desc in (entry or {}).items():
            if ref not in reads:  # an attribute's name (`tl.load` lists `load`), or shadowed by a local
                continue
            if isinstance(desc, dict) and "unsupported" in desc:
                raise ReplayError(f"kernel {name} reads the module-level name {ref!r}, a "
                                  f"{str(desc['unsupported'])[:60]}, which the replay cannot rebuild; a kernel may "
                                  "read numbers, tl.constexpr values, Triton's modules and other @triton.jit functions")
            if isinstance(desc, dict) and "kernel" in desc:
                if str(desc["kernel"]) not in kernels:
                    raise ReplayError(f"kernel {name} calls {str(desc['kernel'])[:60]!r}, which the program does not list")
                later.append((ref, str(desc["kernel"])))
            else:
                setattr(module, ref, _global(desc))
    return later


JIT_OPTIONS = ("do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline")


def _jit_options(node: ast.FunctionDef) -> dict[str, Any]:
    """The literal options of its `@triton.jit(...)` (`noinline`, `do_not_specialize`...): they change what is
    compiled, and so the cache key. Anything but a literal (a `repr` callable) is left out."""
    for dec in node.decorator_list:
        func = dec.func if isinstance(dec, ast.Call) else None
        if getattr(func, "attr", None) == "jit" or getattr(func, "id", None) == "jit":
            options = {}
            for kw in dec.keywords:  # type: ignore[union-attr]
                if kw.arg in JIT_OPTIONS:
                    try:
                        options[kw.arg] = ast.literal_eval(kw.value)
                    except ValueError:
                        continue
            return options
    return {}


def _global_reads(node: ast.FunctionDef) -> set[str]:
    """Names a kernel's body and signature read that are not its own (arguments or assigned names). Its
    decorators are not walked: they are dropped (an autotuner's `configs=CONFIGS` is never evaluated here)."""
    args = node.args
    local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    parts: list[ast.AST] = [*node.body, args] + ([node.returns] if node.returns is not None else [])
    names = [n for part in parts for n in ast.walk(part) if isinstance(n, ast.Name)]
    local |= {n.id for n in names if isinstance(n.ctx, ast.Store)}
    return {n.id for n in names if isinstance(n.ctx, ast.Load)} - local


def _global(desc: Any) -> Any:
    import triton.language as tl

    if not isinstance(desc, dict) or len(desc) != 1:
        raise ReplayError(f"bad global in the program: {str(desc)[:60]}")
    (kind, value), = desc.items()
    if kind == "value":
        return _scalar(value)
    if kind == "constexpr":
        return tl.constexpr(_scalar(value))
    if kind == "tl_dtype":
        return tl.dtype(str(value))
    if kind in ("module", "attr"):
        name = str(value if kind == "module" else value[0])
        if not name.startswith(TRITON_MODULES):
            raise ReplayError(f"a kernel reads module {name[:60]!r}: only Triton's modules and math are replayed")
        target = importlib.import_module(name)
        for part in ([] if kind == "module" else str(value[1]).split(".")):
            target = getattr(target, part)
        return target
    raise ReplayError(f"bad global kind {kind[:20]!r}")


def _scalar(v: Any) -> Any:
    return decode_float(v) if isinstance(v, dict) and "float" in v else v


def _torch_attr(name: Any, kind: type | tuple[type, ...]) -> Any:
    """`torch.<name>` when it is a `kind` (a dtype, a memory format, a layout); else the program is bad."""
    value = getattr(torch, str(name), None)
    if not isinstance(value, kind):
        raise ReplayError(f"the program names {str(name)[:40]!r} where a torch {getattr(kind, '__name__', 'enum')} goes")
    return value


# ================================================================================================ running

def _op(name: str) -> Any:
    namespace, _, rest = str(name).partition("::")
    if namespace not in NAMESPACES or not rest:
        raise ReplayError(f"the forward call ran operator {str(name)[:60]!r}; only ATen operators (and the "
                          "candidate's Triton kernels) are replayed")
    base, _, overload = rest.partition(".")
    try:
        return getattr(getattr(getattr(torch.ops, namespace), base), overload or "default")
    except AttributeError:
        raise ReplayError(f"unknown operator {str(name)[:60]!r}") from None


def _fill(t: torch.Tensor) -> None:
    if t.is_floating_point() or t.is_complex():
        t.fill_(math.nan)
    elif t.dtype != torch.bool:
        t.fill_(torch.iinfo(t.dtype).max)


class Run:
    """One run of a program on one device; `skip` leaves out the candidate's launches."""

    def __init__(self, program: dict, kernels: dict[str, Any], device: str, skip: bool,
                 copies: CopyTrace | None = None) -> None:
        self.program, self.kernels, self.device, self.skip, self.copies = program, kernels, device, skip, copies
        self.vals: dict[int, torch.Tensor] = {}
        self.host_differs: str | None = None

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
            if "dtype" in d:
                return _torch_attr(d["dtype"], torch.dtype)
            if "device" in d:
                return torch.device("cpu" if d["device"] == "cpu" else self.device)
            if "enum" in d:
                return _torch_attr(d["enum"], (torch.memory_format, torch.layout))
            if "triton_obj" in d:  # a TensorDescriptor: rebuilt around the replay's own tensor
                cls = _global({"attr": list(d["triton_obj"])[:2]})
                return cls(**{str(k): self.value(v) for k, v in (d.get("fields") or {}).items()})
            raise ReplayError(f"bad argument in the program: {str(d)[:60]}")
        return d

    def bind(self, d: Any, got: Any, where: str) -> None:
        if isinstance(d, dict) and "t" in d:
            if not isinstance(got, torch.Tensor):
                raise ReplayError(f"{where} returned {type(got).__name__}, recorded as a tensor")
            self.vals[d["t"]] = got
        elif isinstance(d, dict) and "l" in d:
            if not isinstance(got, (list, tuple)) or len(got) != len(d["l"]):
                raise ReplayError(f"{where} returned a different number of results than recorded")
            for sub, g in zip(d["l"], got):
                self.bind(sub, g, where)
        elif isinstance(d, dict) and "v" in d:
            if not self.skip and self.host_differs is None and not _same(_scalar(d["v"]), got):
                self.host_differs = f"{where} returned {str(got)[:40]} here, {str(_scalar(d['v']))[:40]} when recorded"

    def execute(self, inputs: list[Any], constants: list[torch.Tensor]) -> Any:
        # not copied (a large task's inputs fill the device): the run with launches skipped goes first, and
        # a program that writes its inputs in place (the trials rejected the real call for that) only
        # spoils its own second run
        for slot, x in zip(self.program.get("inputs") or [], inputs):
            if slot is not None and isinstance(x, torch.Tensor):
                self.vals[slot] = x
        for slot, c in zip(self.program.get("constants") or [], constants):
            self.vals[slot] = c
        with torch.no_grad():
            for i, step in enumerate(self.program.get("steps") or []):
                if "op" in step:
                    self._aten(step, i)
                elif "alias" in step:
                    self._alias(step)
                elif not self.skip:
                    self._launch(step)
        return self.value(self.program.get("output"))

    def _aten(self, step: dict, i: int) -> None:
        where = f"operator {str(step['op'])[:60]} (step {i})"
        args = self.value(step.get("args") or {"l": []})
        kwargs = {str(k): self.value(v) for k, v in (step.get("kwargs") or {}).items()}
        got = _op(step["op"])(*args, **kwargs)
        if step["op"] in EMPTY_OPS and isinstance(got, torch.Tensor):
            _fill(got)
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
        self.vals[step.get("slot")] = view.set_(base.untyped_storage(), offset, size, stride)

    def _launch(self, step: dict) -> None:
        name = str(step.get("launch"))
        kernel = self.kernels.get(name)
        grid = step.get("grid")
        if kernel is None or not isinstance(grid, list) or not 1 <= len(grid) <= 3:
            raise ReplayError(f"the program's launch of {name[:60]!r} cannot be replayed (no kernel or no grid)")
        args = self.value(step.get("args") or {"l": []})
        kwargs = {str(k): self.value(v) for k, v in (step.get("kwargs") or {}).items()}
        kernel.run(*args, grid=tuple(int(g) for g in grid), warmup=False, **kwargs)
        if self.copies is not None:
            self.copies.after(kernel, args, kwargs)


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
        from .runner import take_kernel_files

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
            return {"replay_error": f"rebuilding the kernels failed: {type(exc).__name__}: {str(exc)[:200]}"}
        self.kept["replay_program"] = program
        return {"ok": True}

    def op_replay(self, req: dict, bufs: list[bytes], out: list) -> dict[str, Any]:
        """Both runs on the lent inputs; their outputs stay alive until `release` (the referee maps them)."""
        from . import wire

        program, kernels = self.kept.get("replay_program"), self.kept.get("replay_kernels")
        if program is None or kernels is None:
            return {"replay_error": "replay_prepare did not succeed"}
        inputs, constants = wire.decode_value(req["sets"], bufs)
        copies = CopyTrace([*inputs, *constants])
        full = Run(program, kernels, self.device, skip=False, copies=copies)
        try:
            skipped = Run(program, kernels, self.device, skip=True).execute(list(inputs), list(constants))
            got = full.execute(list(inputs), list(constants))
            if self.device == "cuda":
                torch.cuda.synchronize()
        except ReplayError as exc:
            return {"replay_error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - the candidate's kernels, on other inputs
            return {"replay_error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        packs: list[Any] = []
        self.kept["out"] = ([got, skipped], packs)
        encoded = wire.encode_value([got, skipped], out, packs)["list"]
        return {"full": encoded[0], "skipped": encoded[1], "host_differs": full.host_differs,
                "copy": copies.pytorch_copy(got)}


__all__ = ["ReplayError", "ReplayOps", "Run", "build_kernels"]
