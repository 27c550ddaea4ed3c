"""Below-float32 detection and the global precision state the judge pins.

The reference runs in strict float32 (TF32 off in cuBLAS and cuDNN). A candidate is flagged (not failed)
when it computes below float32: autocast, fp16/bf16/fp8 casts, or Triton `tl.dot` left at its default
input precision, which is TF32 for fp32 operands on NVIDIA GPUs unless `input_precision="ieee"` (or
`allow_tf32=False` in older Triton). Source analysis finds the intent; the flag snapshot taken around
each candidate call finds a candidate that flips the global switches at run time (then they are restored).
"""

from __future__ import annotations

import ast
import re
import sys
from typing import Any
from .. import pyparse

LOW_DTYPES = ("float16", "half", "bfloat16", "float8")
LOW_METHODS = ("half", "bfloat16")
LOW_NAMES = ("float16", "half", "bfloat16", "HalfTensor", "BFloat16Tensor")  # under any module name (an alias)


def is_low_name(name: str) -> bool:
    """A dtype (or tensor type) name below float32, whatever module it is reached through: `th.float16` after
    `import torch as th`, `F16` after `from triton.language import float16 as F16`, `torch.HalfTensor`."""
    return name in LOW_NAMES or name.startswith("float8")


def _low_triton_dtype(name: str) -> bool:
    return name.startswith(("fp16", "bf16", "fp8")) or is_low_name(name)


def program_reasons(program: Any, constant_dtypes: tuple[str, ...] = ()) -> list[str]:
    """What the recorded forward call (replay/record.py) shows of lower precision, whatever the source looks like:
    a dtype below float32 among its operators' arguments (a cast, an allocation), or among the tensors it used
    that were made before it (`constant_dtypes`, as the referee received them: an fp16 scratch
    buffer made in `__init__` under a dtype name built at run time)."""
    found: list[str] = [f"the call used {d} tensors made before it" for d in dict.fromkeys(constant_dtypes)
                        if is_low_name(d)][:2]

    def walk(value: Any, op: str) -> None:  # iterative: a forged program may nest deeper than the stack
        todo = [value]
        while todo and len(found) < 4:
            item = todo.pop()
            if isinstance(item, dict):
                dtype = item.get("dtype")
                text = f"the recorded call made {dtype} tensors ({op[:60]})"
                if isinstance(dtype, str) and is_low_name(dtype) and text not in found:
                    found.append(text)
                todo.extend(item.values())
            elif isinstance(item, list):
                todo.extend(item)

    if not isinstance(program, dict):
        return found
    steps, kernels = program.get("steps"), program.get("kernels")  # a forged program may hold anything
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict) and "op" in step:
            walk([step.get("args"), step.get("kwargs")], str(step["op"]))
        elif isinstance(step, dict) and "launch" in step:  # a dtype named by a string argument (`tl.dtype(DT)`)
            for text in _strings([step.get("args"), step.get("kwargs")]):
                if _low_triton_dtype(text) and len(found) < 6:
                    found.append(f"launch of {str(step['launch'])[:40]} passes {text[:12]!r}")
        elif isinstance(step, dict) and "alias" in step:
            walk({"dtype": step.get("dtype")}, "a view of another dtype")
    for name, reads in (kernels if isinstance(kernels, dict) else {}).items():  # module-level Triton dtypes it reads
        for desc in (reads or {}).values() if isinstance(reads, dict) else []:
            dtype = str(desc.get("tl_dtype", desc.get("constexpr_dtype", ""))) if isinstance(desc, dict) else ""
            if _low_triton_dtype(dtype) and len(found) < 6:
                found.append(f"kernel {str(name)[:40]} reads a module-level {dtype[:12]} dtype")
            elif isinstance(desc, dict) and any(_low_triton_dtype(t) for t in _strings(desc)) and len(found) < 6:
                found.append(f"kernel {str(name)[:40]} reads a module-level string naming a dtype below float32")
    return found


def _strings(value: Any) -> list[str]:
    """Every string in a recorded value (iterative: a forged program may nest deeper than the stack)."""
    found, todo = [], [value]
    while todo and len(found) < 256:
        item = todo.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return found
# A dot at float32 accuracy: exact fp32 ("ieee"), or "tf32x3" (each operand split into two TF32 parts, three
# tensor-core products: an error of float32's order, about 1e-6 relative where one TF32 product errs by 1e-3).
# tf32x3 is not flagged by name; the measured precision (checks/measured_precision.py) still judges its output.
STRICT_DOT_KWARGS = {"input_precision": ("ieee", "tf32x3"), "allow_tf32": (False,)}


def pin_strict() -> None:
    """float32 everywhere: what the reference runs under and what candidates are checked under."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def pin_tf32() -> None:
    """The state a user with TF32 enabled runs in (for `speedup_tf32`)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.set_float32_matmul_precision("high")


_SWITCHED: list[str] = []  # what the candidate's call switched through torch._C's setters (watch_switches)
_WATCHING = {"on": False}


def watch_switches() -> None:
    """Wrap torch._C's setters of the global precision switches, once per process, so that a call that turns one
    on and back before it returns is still seen (`torch._C._set_cublas_allow_tf32`,
    reached by a name built at run time, toggled within one call; the snapshot around the call saw nothing). Every
    public way to a switch (`torch.backends...`, `set_float32_matmul_precision`) ends in one of these setters."""
    import torch

    wrapped: dict[int, Any] = {}
    for name in dir(torch._C):
        original = getattr(torch._C, name)
        if not (name.startswith("_set") and _tf32_switch(name) and callable(original)) or hasattr(original, "_watched"):
            continue

        def watched(*args: Any, _original: Any = original, _name: str = name) -> Any:
            enables = any(a is True or (isinstance(a, str) and a.lower() not in ("highest", "ieee", "none"))
                          for a in args)  # turning a switch off (strict float32) is no reason to flag
            if _WATCHING["on"] and enables and len(_SWITCHED) < 8:
                _SWITCHED.append(f"torch._C.{_name}{tuple(str(a)[:20] for a in args)} during the call")
            return _original(*args)

        watched._watched = True  # type: ignore[attr-defined]
        setattr(torch._C, name, watched)
        wrapped[id(original)] = watched
    # torch.backends.cudnn and others keep the setter they were given at import (ContextProp.setter)
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("torch.backends") and m is not None]:
        for prop in vars(type(module)).values():
            if id(getattr(prop, "setter", None)) in wrapped:
                prop.setter = wrapped[id(prop.setter)]


def watching(on: bool) -> list[str]:
    """Start (clear) or stop recording the switches' setters; returns what was recorded."""
    _WATCHING["on"] = on
    seen = list(_SWITCHED)
    if on:
        _SWITCHED.clear()
    return seen


def snapshot() -> dict[str, Any]:
    import os

    import torch

    knobs = getattr(getattr(sys.modules.get("triton"), "knobs", None), "language", None)
    return {
        "triton fp32_default": getattr(knobs, "fp32_default", None) or os.environ.get("TRITON_F32_DEFAULT"),
        "torch.backends.cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "torch.backends.cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "allow_fp16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "allow_bf16_reduced_precision_reduction": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        "autocast_cuda": torch.is_autocast_enabled("cuda"),
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
    }


def restore(state: dict[str, Any]) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = state["torch.backends.cuda.matmul.allow_tf32"]
    torch.backends.cudnn.allow_tf32 = state["torch.backends.cudnn.allow_tf32"]
    torch.set_float32_matmul_precision(state["float32_matmul_precision"])
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = state["allow_fp16_reduced_precision_reduction"]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = state["allow_bf16_reduced_precision_reduction"]
    torch.set_autocast_enabled("cuda", state["autocast_cuda"])
    torch.set_autocast_enabled("cpu", state["autocast_cpu"])


def changed_flags(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changed = [f"{k}: {before[k]!r} -> {after[k]!r}" for k in before if after.get(k) != before[k]]
    knob = after.get("triton fp32_default")  # set at import, it never changes during a call: its value tells
    if knob not in (None, "ieee") and not any(c.startswith("triton fp32_default") for c in changed):
        changed.append(f"triton fp32_default is {str(knob)[:20]!r}: tl.dot on fp32 runs below float32")
    return changed


def _dotted(node: ast.AST) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_strict_dot(call: ast.Call) -> bool:
    for kw in call.keywords:
        allowed = STRICT_DOT_KWARGS.get(kw.arg or "")
        if allowed and isinstance(kw.value, ast.Constant) and kw.value.value in allowed:
            return True
    return False


def source_reasons(source: str) -> tuple[list[str], bool]:
    """(reasons the source computes below fp32, whether it has TF32-default `tl.dot`s). Never raises."""
    try:
        tree = pyparse.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [], False
    reasons: list[str] = []
    tf32_dot = False
    triton_names = _triton_names(tree)
    # `torch.backends.cuda.matmul.allow_tf32 = False`: turning a switch off (strict float32) is no reason to flag
    switched_off = {id(t) for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                    and (n.value.value is False or str(n.value.value).lower() in ("highest", "ieee"))
                    for t in n.targets if isinstance(t, ast.Attribute)}

    def add(text: str, node: ast.AST) -> None:
        line = f"{text} (line {getattr(node, 'lineno', '?')})"
        if line not in reasons:
            reasons.append(line)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if is_low_name(alias.name):
                    add(f"imports {alias.name} from {node.module}: computes below float32", node)
        elif isinstance(node, ast.Attribute):
            name = _dotted(node)
            leaf = node.attr
            if is_low_name(leaf) or (any(leaf.startswith(d) for d in LOW_DTYPES) and
                                     name.split(".")[0] in ("tl", "torch", "triton")):
                add(f"uses {name}: computes below float32", node)
            elif "autocast" in leaf or name.endswith("amp.autocast"):
                add(f"uses {name}: autocast computes matmuls/convolutions in fp16/bf16", node)
            elif _tf32_switch(leaf) and id(node) not in switched_off:  # allow_tf32, torch._C._set_cublas_allow_tf32...
                add(f"touches {name}: may enable TF32 or reduced-precision reductions", node)
        elif isinstance(node, ast.Call):
            fname = _dotted(node.func)
            leaf = fname.rsplit(".", 1)[-1]
            if isinstance(node.func, ast.Attribute) and leaf in LOW_METHODS and not node.args:
                add(f"calls .{leaf}(): computes below float32", node)
            elif leaf == "set_float32_matmul_precision":
                add("calls set_float32_matmul_precision: may enable TF32", node)
            elif leaf == "autocast":
                add("uses autocast: computes matmuls/convolutions in fp16/bf16", node)
            elif leaf == "getattr" and node.args and _dotted(node.args[0]).split(".")[0] in triton_names[0] \
                    and not (len(node.args) > 1 and isinstance(node.args[1], ast.Constant)):
                add("reaches into Triton by a name built at run time (getattr): may compute below float32", node)
            elif _is_triton_dot(fname, triton_names) and not _is_strict_dot(node):
                tf32_dot = True
                add("tl.dot without input_precision='ieee': fp32 operands run in TF32 on NVIDIA GPUs", node)
            elif leaf == "dot":
                for kw in node.keywords:
                    if kw.arg == "input_precision" and isinstance(kw.value, ast.Constant) and kw.value.value == "tf32":
                        add(f"tl.dot with input_precision={kw.value.value!r}", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ("float16", "bfloat16", "fp16", "bf16"):
            add(f"names dtype {node.value!r}", node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME_LIKE.fullmatch(node.value) \
                and node.value not in STRICT_DOT_KWARGS["input_precision"] \
                and _tf32_switch(node.value):  # a name's fragment ('_set_cublas_allow_tf32'), not prose
            add(f"names {node.value[:40]!r}: may enable TF32 or reduced-precision reductions", node)
    return reasons, tf32_dot


_NAME_LIKE = re.compile(r"[\w.]+")
_SWITCH_WORDS = ("tf32", "fp32_precision", "matmul_precision", "reduced_precision", "reductionfp16",
                 "reductionbf16", "fp16reduction", "bf16reduction", "fp32_default", "f32_default", "bf16_reduction")


def _tf32_switch(name: str) -> bool:
    """A name that reaches one of the global switches below float32: `allow_tf32`, the private setters behind it
    (`torch._C._set_cublas_allow_tf32`: switched on and back within one call, which the flag
    snapshot around the call never sees), `set_float32_matmul_precision`, reduced-precision reductions."""
    low = name.lower().replace("_", "")
    return any(w.replace("_", "") in low for w in _SWITCH_WORDS)


def _triton_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names the source binds to Triton's modules (`import triton.language as T`) and to `dot` itself."""
    modules, dots = {"tl", "triton"}, {"dot"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "triton":
                    modules.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "triton":
            for alias in node.names:
                (dots if alias.name == "dot" else modules).add(alias.asname or alias.name)
    for _ in range(3):  # `T2 = tl`, `mm = tl.dot`, and chains of them
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = _dotted(node.value)
                if value.split(".")[0] in modules:
                    (dots if value.endswith(".dot") else modules).add(node.targets[0].id)
                elif value in dots:
                    dots.add(node.targets[0].id)
    return modules, dots


def _is_triton_dot(fname: str, names: tuple[set[str], set[str]]) -> bool:
    modules, dots = names
    parts = fname.split(".")
    return (len(parts) == 1 and parts[0] in dots) or (len(parts) > 1 and parts[-1] == "dot" and parts[0] in modules)


HALF_WORDS = ("float16", "half", "bfloat16", "fp16", "bf16", "tf32", "TF32", "autocast")


def relative_to_task(reasons: list[str], task_dtype: str) -> list[str]:
    """Only computing below the task's own precision counts: a bf16 kernel for a bf16 task is fine
    (fp8 still is not)."""
    if task_dtype == "float64":  # TF32 takes fp32 operands: an fp64 tl.dot is fp64 (and the tolerance is fp64's)
        return [r for r in reasons if not r.startswith("tl.dot without input_precision")]
    if task_dtype == "float32":
        return list(reasons)
    return [r for r in reasons if "float8" in r or not any(w in r for w in HALF_WORDS)]
