"""What a speedup means against the hardware: the task's minimum work, the GPU's peaks, and the floor.

A speedup over an eager reference says little on its own (the reference may be slow); the roofline
says how far a kernel is from what this GPU could do at all. The work is counted once per task from
the reference (`count_cost`, run in the reference's runner, on torch's meta device where possible):
- bytes: every input read once, every output written once, every parameter and buffer read once
  (views of one storage count once; an expanded tensor counts the memory it spans, not its elements);
- FLOPs: `torch.utils.flop_counter.FlopCounterMode` over one forward of the reference (it counts
  matmul, convolution and attention; elementwise work counts 0, so such tasks are memory-bound here).

The bytes at peak bandwidth are a physical lower bound on the time of any correct kernel: a candidate
whose median is below `IMPOSSIBLE_MARGIN` of it did not do the work (it cached, skipped or lied), and is
rejected. The bound is only applied when every reference variant itself runs above it: a task whose
output depends on only part of its inputs breaks the premise, and its reference shows that.

Everything here is pure except `measure_copy_gbps` and `read_clocks` (GPU, called in the referee).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..models import Clocks, Roofline, TaskCost
from ..tasks.format import import_file

IMPOSSIBLE_MARGIN = 0.8  # a median under 0.8x the bytes-at-peak-bandwidth floor is rejected
COPY_BYTES = 256 << 20  # the measured-bandwidth fallback copies this much, device to device


@dataclass(frozen=True)
class Peak:
    """Dense (no sparsity) peaks of one GPU: TFLOP/s by arithmetic, and memory bandwidth in GB/s."""

    name: str
    fp32: float | None
    tf32: float | None
    bf16: float | None
    gbps: float
    source: str = "datasheet"


# Sources: NVIDIA datasheets and product pages (H100 SXM/PCIe/NVL datasheet; H200 product page;
# A100 40/80 GB datasheet; L40S, L40, L4, A10, A40 datasheets; RTX A6000 and RTX 6000 Ada datasheets;
# the Ada Lovelace architecture whitepaper, appendix, for the GeForce RTX 4090 (FP32-accumulate tensor
# rates); the HGX B200 specification, per GPU). Tensor-core figures there are quoted "with sparsity":
# the dense rates below are half of them. fp16 dense tensor rates equal bf16 on all of these.
_PEAKS: tuple[tuple[str, Peak], ...] = (
    (r"\bH100\b.*\bPCIe\b", Peak("H100 PCIe", 51.0, 378.0, 756.0, 2000.0)),
    (r"\bH100\b.*\bNVL\b", Peak("H100 NVL", 60.0, 417.5, 835.5, 3900.0)),
    (r"\bH100\b", Peak("H100 SXM", 67.0, 494.5, 989.5, 3350.0)),
    (r"\bH200\b.*\bNVL\b", Peak("H200 NVL", 60.0, 417.5, 835.5, 4800.0)),
    (r"\bH200\b", Peak("H200 SXM", 67.0, 494.5, 989.5, 4800.0)),
    (r"\bB200\b", Peak("B200 (HGX, per GPU)", 75.0, 1125.0, 2250.0, 8000.0)),
    (r"\bA100\b.*80GB.*PCIe|\bA100\b.*PCIe.*80GB", Peak("A100 80GB PCIe", 19.5, 156.0, 312.0, 1935.0)),
    (r"\bA100\b.*80GB", Peak("A100 80GB SXM", 19.5, 156.0, 312.0, 2039.0)),
    (r"\bA100\b", Peak("A100 40GB", 19.5, 156.0, 312.0, 1555.0)),
    (r"\bL40S\b", Peak("L40S", 91.6, 183.0, 362.05, 864.0)),
    (r"\bL40\b", Peak("L40", 90.5, 90.5, 181.05, 864.0)),
    (r"\bL4\b", Peak("L4", 30.3, 60.0, 121.0, 300.0)),
    (r"\bA10\b", Peak("A10", 31.2, 62.5, 125.0, 600.0)),
    (r"\bA40\b", Peak("A40", 37.4, 74.8, 149.7, 696.0)),
    (r"\bRTX 4090\b", Peak("GeForce RTX 4090", 82.6, 82.6, 165.2, 1008.0)),
    (r"\bRTX 6000 Ada\b", Peak("RTX 6000 Ada", 91.1, 182.1, 364.2, 960.0)),
    (r"\bRTX A6000\b", Peak("RTX A6000", 38.7, 77.4, 154.8, 768.0)),
)


def lookup_peak(gpu_name: str | None) -> Peak | None:
    """The datasheet peaks for a name as `torch.cuda.get_device_name` writes it, or None. Pure."""
    if not gpu_name:
        return None
    for pattern, peak in _PEAKS:
        if re.search(pattern, gpu_name, flags=re.IGNORECASE):
            return peak
    return None


def measured_peak(gpu_name: str | None, gbps: float) -> Peak:
    """An unknown GPU: bandwidth from a device-to-device copy, no FLOP peaks. Pure."""
    return Peak(gpu_name or "unknown GPU", None, None, None, gbps,
                source=f"measured: device-to-device copy of {COPY_BYTES >> 20} MiB, {gbps:.0f} GB/s")


def flops_basis(task_dtype: str, below_fp32: bool) -> str:
    """Which FLOP peak a candidate is held to: its task's precision, TF32 if it computes fp32 below it. Pure."""
    if task_dtype in ("float16", "bfloat16"):
        return "bf16"
    return "tf32" if below_fp32 else "fp32"


# -- counting the work (runs in the reference's runner) -------------------------------------------
def _span_elements(t: Any) -> int:
    """Elements of memory a tensor's view touches (an expanded tensor spans fewer than it has)."""
    if t.numel() == 0:
        return 0
    span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()) if size > 0)
    return min(int(t.numel()), int(span))


def unique_bytes(tensors: list[Any]) -> int:
    """Bytes of distinct memory the tensors hold: views of one storage count once (the largest of them,
    so the sum stays a lower bound). Meta tensors (no addresses) are told apart by their base tensor."""
    import torch

    seen: dict[Any, int] = {}
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        ptr = t.untyped_storage().data_ptr() if t.device.type != "meta" else 0
        key = ("ptr", t.device.type, ptr) if ptr else ("id", id(t._base if t._base is not None else t))
        seen[key] = max(seen.get(key, 0), _span_elements(t) * t.element_size())
    return sum(seen.values())


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flat(v)]
    return [value]


def count_cost(model: Any, inputs: list[Any], note: str = "") -> TaskCost:
    """Bytes and FLOPs of one forward call of `model` on `inputs` (any device, meta included)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    flops: int | None = None
    counter = FlopCounterMode(display=False)
    with torch.no_grad():
        try:
            with counter:
                result = model(*inputs)
            flops = int(counter.get_total_flops())
        except Exception:  # noqa: BLE001 - a FLOP formula failing leaves the bytes, which need only the outputs
            result = model(*inputs)
            note = (note + "; " if note else "") + "FLOPs could not be counted"
    state = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
    i, o, p = unique_bytes(_flat(inputs)), unique_bytes(_flat(result)), unique_bytes(state)
    return TaskCost(min_bytes=i + o + p, input_bytes=i, output_bytes=o, param_bytes=p, flops=flops, note=note)


def count_task(module: Any, path: Path, init_inputs: list[Any], device: str, small: bool) -> dict[str, Any]:
    """A task's cost, as the reference's runner answers it: {"cost": TaskCost} or {"cost_unavailable": why}.

    First on torch's meta device (shapes, no data, no memory): the task's file imported afresh, so its
    top-level constants have their full-size values even where the runner holds small shapes. Where meta
    kernels are missing (or shapes depend on data), on one real input set with a model of its own, built
    under a fixed seed (the evaluation's model is not touched) -- only at full size."""
    import torch

    from ..errors import safe_str

    try:
        fresh = import_file(module.__name__ + "_meta", path)
        with torch.device("meta"):
            model = fresh.Model(*fresh.get_init_inputs())
            return {"cost": count_cost(model, list(fresh.get_inputs()), "counted on torch's meta device").model_dump()}
    except Exception as exc:  # noqa: BLE001 - some ops lack meta kernels; data-dependent shapes
        meta_error = f"{type(exc).__name__}: {safe_str(exc)[:120]}"
    if small:
        return {"cost_unavailable": f"not countable on the meta device ({meta_error}), and the reference runs "
                "at small shapes here"}
    try:
        torch.manual_seed(0)
        with torch.device(device):
            model = module.Model(*init_inputs)
            model = model.to(device) if isinstance(model, torch.nn.Module) else model
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
            cost = count_cost(model, inputs, f"counted on one real input set (meta device: {meta_error})")
        if device == "cuda":
            torch.cuda.synchronize()
        return {"cost": cost.model_dump()}
    except BaseException as exc:  # noqa: BLE001 - task code
        return {"cost_unavailable": f"counting failed: {type(exc).__name__}: {safe_str(exc)[:200]}"}


# -- the verdict of the hardware ----------------------------------------------------------------------
def lower_bound_ms(min_bytes: int, gbps: float) -> float:
    """Milliseconds to move `min_bytes` at `gbps`: no correct kernel runs faster. Pure."""
    return min_bytes / (gbps * 1e9) * 1e3 if gbps > 0 else 0.0


def assess(cost: TaskCost, cand_ms: float, reference_ms: list[float], peak: Peak, basis: str,
           margin: float = IMPOSSIBLE_MARGIN) -> tuple[Roofline, str | None]:
    """The candidate's place on the roofline, and why its time is impossible (None when it is not). Pure.

    `reference_ms` holds every reference variant's median (eager, TF32, compiled): when one of them is
    itself under the floor, the floor overstates this task's minimum work and is not applied."""
    floor = lower_bound_ms(cost.min_bytes, peak.gbps)
    seconds = max(cand_ms, 1e-9) * 1e-3
    peak_tflops = getattr(peak, basis, None) if basis in ("fp32", "tf32", "bf16") else None
    flops = cost.flops
    compute_ms = flops / (peak_tflops * 1e12) * 1e3 if flops and peak_tflops else 0.0
    achieved_gbps = cost.min_bytes / seconds / 1e9
    achieved_tflops = flops / seconds / 1e12 if flops is not None else None
    fast_refs = [r for r in reference_ms if math.isfinite(r) and r < margin * floor]
    checked = not fast_refs and floor > 0
    notes = []
    if cost.note:
        notes.append(cost.note)
    if fast_refs:
        notes.append(f"a reference ran in {min(fast_refs):.4g} ms, under the {floor:.4g} ms floor (does the output "
                     "depend on only part of the inputs?): the floor is not applied to this task")
    roof = Roofline(
        min_bytes=cost.min_bytes, flops=flops, achieved_gbps=round(achieved_gbps, 1),
        achieved_tflops=round(achieved_tflops, 3) if achieved_tflops is not None else None,
        peak_gbps=peak.gbps, peak_tflops=peak_tflops, peak_basis=basis,
        pct_peak_bandwidth=round(100 * achieved_gbps / peak.gbps, 1),
        pct_peak_flops=round(100 * achieved_tflops / peak_tflops, 1) if achieved_tflops is not None and peak_tflops
        else None,
        pct_roofline=round(100 * max(floor, compute_ms) / max(cand_ms, 1e-9), 1),
        bound="compute" if compute_ms > floor else "memory", lower_bound_ms=round(floor, 6), bound_checked=checked,
        peak_source=f"{peak.name}, {peak.source}", note="; ".join(notes) or None)
    if checked and cand_ms < margin * floor:
        return roof, (f"the candidate's median time {cand_ms:.4g} ms is under {margin:g}x the physical floor of "
                      f"{floor:.4g} ms ({cost.min_bytes} bytes, every input read and every output written once, at "
                      f"{peak.gbps:g} GB/s, {peak.name}): a correct kernel cannot be that fast. Was work skipped, "
                      "cached across calls, or done outside the timed call?")
    return roof, None


# -- on the GPU (the referee) ------------------------------------------------------------------------
_measured: dict[int, float] = {}


def measure_copy_gbps(device: int = 0) -> float:
    """Bandwidth of a device-to-device copy (read + write), best of a few; once per process and device."""
    if device not in _measured:
        import torch

        src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=f"cuda:{device}")
        dst = torch.empty_like(src)
        best = math.inf
        for _ in range(6):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end))
        _measured[device] = 2 * COPY_BYTES / (best * 1e-3) / 1e9
        del src, dst
    return _measured[device]


def read_clocks(device: int = 0) -> Clocks | None:
    """SM and memory clocks: the current SM clock where torch can read it (NVML), else the maxima in the
    device properties (kHz there); None when neither is available."""
    import torch

    props = torch.cuda.get_device_properties(device)
    mem = getattr(props, "memory_clock_rate", None)
    mem_mhz = int(mem) // 1000 if isinstance(mem, int) and mem > 0 else None
    try:
        current = int(torch.cuda.clock_rate(device))
        if current > 0:
            return Clocks(sm_mhz=current, memory_mhz=mem_mhz, source="nvml (current SM clock)")
    except Exception:  # noqa: BLE001 - pynvml absent, or no such function in this torch
        pass
    sm = getattr(props, "clock_rate", None)
    sm_mhz = int(sm) // 1000 if isinstance(sm, int) and sm > 0 else None
    if sm_mhz is None and mem_mhz is None:
        return None
    return Clocks(sm_mhz=sm_mhz, memory_mhz=mem_mhz, source="device properties (maximum)")


def peak_for(gpu_name: str | None, device: int = 0) -> Peak:
    """The datasheet peaks of a known GPU, else the measured copy bandwidth (GPU)."""
    return lookup_peak(gpu_name) or measured_peak(gpu_name, measure_copy_gbps(device))


__all__ = ["IMPOSSIBLE_MARGIN", "Peak", "assess", "count_cost", "count_task", "flops_basis", "lookup_peak", "lower_bound_ms",
           "measure_copy_gbps", "measured_peak", "peak_for", "read_clocks", "unique_bytes"]
