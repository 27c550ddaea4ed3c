"""Task synthesis: new KernelBench-format practice tasks from mutated / recombined operator chains.

A task is a chain: a head op (pointwise on the input, Linear, matmul of two inputs, Conv2d, max/avg
pooling) followed by 1-4 tail ops (activations, scale / bias / clamp, residual add of the head's
output, reductions with keepdim, layernorm / rmsnorm / groupnorm, softmax / log_softmax). Chains are
drawn fresh, mutated (replace / insert / delete an op, resample shapes) or recombined (head and prefix
of one chain, suffix of another) from the chains already kept; an op that does not fit the tensor at
its place (e.g. a per-feature bias after the feature dimension was reduced) is dropped on replay.

Each chain is emitted as KernelBench source with top-level integer shape constants plus
`small_shapes` for the CPU interpreter. Nothing here runs the generated code: `synthesize` checks the
sources statically, and whether a task is degenerate (errors, non-finite or input-independent output,
a constant that would pass the tolerance) is decided by the judge worker's probe when the task is
created (`App.synthesize_tasks` drops those), so task code never runs in the server process.
Everything is driven by one `random.Random(seed)`: the same seed gives the same tasks.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field, replace
from typing import Any

from adaexplore_mcp.tasks.synthesis_checks import format_problem
from adaexplore_mcp.tasks.synthesis_emit import _emit

DTYPE_TOLERANCE = {"float32": 1e-2, "float16": 2e-2, "bfloat16": 5e-2}
LOW_PRECISION_SHARE = 0.12  # chance that an eligible chain uses float16/bfloat16 inputs

ACTIVATIONS = {
    "relu": "torch.relu(x)",
    "gelu": "F.gelu(x)",
    "silu": "F.silu(x)",
    "tanh": "torch.tanh(x)",
    "sigmoid": "torch.sigmoid(x)",
    "leaky_relu": "F.leaky_relu(x, negative_slope=0.1)",
    "hardswish": "F.hardswish(x)",
}
SCALES = [0.5, 1.5, 2.0, -1.0, 0.25, 3.0]
CLAMPS = [(-1.0, 1.0), (-0.5, 0.5), (0.0, 6.0), (-2.0, 2.0), (-0.25, 1.5)]
SOFTMAX_TEMPERATURES = [4.0, 8.0]

OP_FAMILY = {
    **{a: "activation" for a in ACTIVATIONS},
    "scale": "pointwise", "bias": "pointwise", "clamp": "pointwise", "residual": "residual",
    "sum": "reduction", "mean": "reduction", "amax": "reduction", "max": "reduction",
    "spatial_mean": "reduction", "spatial_amax": "reduction",
    "layernorm": "norm", "rmsnorm": "norm", "groupnorm": "norm",
    "softmax": "softmax", "log_softmax": "softmax",
}
HEAD_FAMILY = {"pointwise": "elementwise", "linear": "matmul", "matmul": "matmul", "conv2d": "conv",
               "maxpool2d": "pooling", "avgpool2d": "pooling"}


@dataclass(frozen=True)
class SynthesizedTask:
    name: str
    source: str
    small_shapes: dict[str, int]
    description: str
    ops: tuple[str, ...]
    dtype: str = "float32"
    atol: float = 1e-2
    rtol: float = 1e-2
    families: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# chain specification


@dataclass
class Chain:
    head: str
    rank: int  # 2 or 4
    dims: dict[str, int]  # full-size shape constants
    small: dict[str, int]  # small_shapes overrides
    head_args: dict[str, Any] = field(default_factory=dict)
    ops: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    dtype: str = "float32"


def _pick(rng: random.Random, values):
    return values[rng.randrange(len(values))]


def _random_head(rng: random.Random) -> Chain:
    head = _pick(rng, ["pointwise", "pointwise", "linear", "linear", "matmul", "conv2d", "conv2d",
                       "maxpool2d", "avgpool2d"])
    if head == "pointwise" and rng.random() < 0.6 or head in ("linear", "matmul"):
        rank = 2
    else:
        rank = 4
    if head == "pointwise" and rank == 2:
        while True:
            b, f = _pick(rng, [1024, 2048, 4096, 8192]), _pick(rng, [1024, 2048, 4096, 8192])
            if 4 * 2**20 <= b * f <= 32 * 2**20:
                break
        return Chain(head, 2, {"batch_size": b, "features": f}, {"batch_size": 8, "features": _pick(rng, [32, 48, 64])},
                     {"op": _pick(rng, ["affine", "square", "abs"])})
    if head == "pointwise":
        dims = {"batch_size": _pick(rng, [16, 32, 64]), "channels": _pick(rng, [16, 32, 64, 128]),
                "height": _pick(rng, [32, 64, 128]), "width": _pick(rng, [32, 64, 128])}
        while math.prod(dims.values()) > 32 * 2**20:
            dims["batch_size"] //= 2
        while math.prod(dims.values()) < 4 * 2**20:
            dims["batch_size"] *= 2
        return Chain(head, 4, dims, {"batch_size": 2, "channels": 8, "height": 6, "width": 6},
                     {"op": _pick(rng, ["affine", "square", "abs"])})
    if head in ("linear", "matmul"):
        while True:
            b = _pick(rng, [256, 512, 1024, 2048])
            k = _pick(rng, [512, 1024, 2048, 4096])
            n = _pick(rng, [512, 1024, 2048, 4096])
            if 2**30 <= 2 * b * k * n <= 2**34:
                break
        if head == "linear":
            return Chain(head, 2, {"batch_size": b, "in_features": k, "out_features": n},
                         {"batch_size": 8, "in_features": 32, "out_features": _pick(rng, [32, 48])})
        return Chain(head, 2, {"batch_size": b, "inner": k, "features": n},
                     {"batch_size": 8, "inner": 32, "features": _pick(rng, [32, 48])})
    if head == "conv2d":
        k = _pick(rng, [1, 3, 3, 5])
        while True:
            dims = {"batch_size": _pick(rng, [8, 16, 32]), "in_channels": _pick(rng, [3, 8, 16, 32]),
                    "out_channels": _pick(rng, [16, 32, 64]), "height": _pick(rng, [32, 64, 128]),
                    "kernel_size": k}
            dims["width"] = dims["height"]
            flops = 2 * dims["batch_size"] * dims["out_channels"] * dims["in_channels"] * k * k * dims["height"] ** 2
            outsize = dims["batch_size"] * dims["out_channels"] * dims["height"] ** 2
            if flops <= 8e9 and 4 * 2**20 <= outsize <= 32 * 2**20:
                break
        return Chain(head, 4, dims, {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 8, "width": 8},
                     {"padding": _pick(rng, [0, k // 2])})
    # pooling
    dims = {"batch_size": _pick(rng, [16, 32]), "channels": _pick(rng, [16, 32, 64]),
            "height": _pick(rng, [64, 128, 256])}
    dims["width"] = dims["height"]
    while math.prod(dims.values()) > 64 * 2**20:
        dims["batch_size"] //= 2
    while math.prod(dims.values()) < 8 * 2**20:
        dims["batch_size"] *= 2
    kernel, stride, pad = _pick(rng, [(2, 2, 0), (3, 2, 1), (3, 1, 1), (4, 4, 0)])
    return Chain(head, 4, dims, {"batch_size": 2, "channels": 8, "height": 8, "width": 8},
                 {"kernel": kernel, "stride": stride, "padding": pad})


def _random_op(rng: random.Random, state: dict) -> tuple[str, dict[str, Any]] | None:
    """A random op legal in `state` (see _replay), or None."""
    choices: list[str] = list(ACTIVATIONS) + ["scale", "clamp"]
    if state["feat"]:
        choices += ["bias", "softmax", "log_softmax", "sum", "mean", "amax", "max"]
        if state["rank"] == 2:
            choices += ["layernorm", "rmsnorm", "layernorm", "rmsnorm"]
        elif state["spatial"]:
            choices += ["groupnorm", "groupnorm"]
    if state["rank"] == 4 and state["spatial"]:
        choices += ["spatial_mean", "spatial_amax"]
    if state["same_as_head"] and state["n_ops"] > 0:
        choices += ["residual", "residual"]
    op = _pick(rng, choices)
    args: dict[str, Any] = {}
    if op == "scale":
        args["value"] = _pick(rng, SCALES)
    elif op == "clamp":
        args["lo"], args["hi"] = _pick(rng, CLAMPS)
    elif op == "softmax":
        args["temperature"] = _pick(rng, SOFTMAX_TEMPERATURES)
    elif op == "groupnorm":
        args["groups"] = _pick(rng, [2, 4])
    return op, args


def _legal(op: str, state: dict) -> bool:
    if op in ACTIVATIONS or op in ("scale", "clamp"):
        return True
    if op in ("bias", "softmax", "log_softmax", "sum", "mean", "amax", "max"):
        return bool(state["feat"])
    if op in ("layernorm", "rmsnorm"):
        return state["rank"] == 2 and bool(state["feat"])
    if op == "groupnorm":
        return state["rank"] == 4 and bool(state["feat"]) and state["spatial"]
    if op in ("spatial_mean", "spatial_amax"):
        return state["rank"] == 4 and state["spatial"]
    if op == "residual":
        return state["same_as_head"] and state["n_ops"] > 0
    return False


# ---------------------------------------------------------------------------------------------
# emission


def _task_from_chain(chain: Chain) -> SynthesizedTask | None:
    emitted = _emit(chain)
    if emitted is None:
        return None
    source, used_ops, description, small = emitted
    digest = hashlib.sha256(source.encode()).hexdigest()[:6]
    short = {"log_softmax": "logsoftmax", "leaky_relu": "lrelu", "spatial_mean": "hwmean",
             "spatial_amax": "hwamax", "hardswish": "hswish", "layernorm": "ln", "rmsnorm": "rms",
             "groupnorm": "gn", "residual": "res"}
    parts = [short.get(o, o) for o in used_ops]
    dtag = {"float32": "", "float16": "_f16", "bfloat16": "_bf16"}[chain.dtype]
    name = f"syn_{'_'.join(parts)}{dtag}_{digest}"
    tol = DTYPE_TOLERANCE[chain.dtype]
    families = tuple(dict.fromkeys([HEAD_FAMILY[chain.head]] + [OP_FAMILY[o] for o in used_ops[1:]]))
    return SynthesizedTask(name=name, source=source, small_shapes=small, description=description,
                           ops=tuple(used_ops), dtype=chain.dtype, atol=tol, rtol=tol, families=families)


# ---------------------------------------------------------------------------------------------
# generation: fresh chains, mutation, recombination


def _fresh_chain(rng: random.Random) -> Chain:
    chain = _random_head(rng)
    if chain.head in ("pointwise", "linear", "matmul") and chain.rank == 2 and rng.random() < LOW_PRECISION_SHARE:
        chain.dtype = _pick(rng, ["float16", "bfloat16"])
    _fill_ops(rng, chain, rng.randint(1, 4))
    return chain


def _initial_state(chain: Chain) -> dict:
    feat = {"pointwise": "features" if chain.rank == 2 else "channels", "linear": "out_features",
            "matmul": "features", "conv2d": "out_channels"}.get(chain.head, "channels")
    return {"rank": chain.rank, "feat": feat, "spatial": True, "same_as_head": True, "n_ops": 0}


def _state_after(chain: Chain, ops) -> dict:
    state = _initial_state(chain)
    for op, _ in ops:
        if not _legal(op, state):
            continue
        state["n_ops"] += 1
        if op in ("sum", "mean", "amax", "max"):
            state["feat"] = None
            state["same_as_head"] = False
        elif op in ("spatial_mean", "spatial_amax"):
            state["spatial"] = False
            state["same_as_head"] = False
    return state


def _fill_ops(rng: random.Random, chain: Chain, n: int) -> None:
    while len(chain.ops) < n:
        op = _random_op(rng, _state_after(chain, chain.ops))
        if op is not None:
            chain.ops.append(op)


def _copy(chain: Chain) -> Chain:
    return replace(chain, dims=dict(chain.dims), small=dict(chain.small), head_args=dict(chain.head_args),
                   ops=[(o, dict(a)) for o, a in chain.ops])


def _mutate(rng: random.Random, parent: Chain) -> Chain:
    chain = _copy(parent)
    kind = _pick(rng, ["replace", "insert", "delete", "shapes", "head"])
    if kind == "replace" and chain.ops:
        i = rng.randrange(len(chain.ops))
        op = _random_op(rng, _state_after(chain, chain.ops[:i]))
        if op:
            chain.ops[i] = op
    elif kind == "insert" and len(chain.ops) < 4:
        i = rng.randrange(len(chain.ops) + 1)
        op = _random_op(rng, _state_after(chain, chain.ops[:i]))
        if op:
            chain.ops.insert(i, op)
    elif kind == "delete" and len(chain.ops) > 1:
        del chain.ops[rng.randrange(len(chain.ops))]
    elif kind == "shapes" or kind == "head":
        fresh = _random_head(rng)
        if kind == "shapes" and fresh.head != chain.head:
            # same head kind, new shapes: draw until the head matches (bounded)
            for _ in range(20):
                fresh = _random_head(rng)
                if fresh.head == chain.head and fresh.rank == chain.rank:
                    break
        fresh.ops = chain.ops
        fresh.dtype = chain.dtype if fresh.rank == 2 and fresh.head in ("pointwise", "linear", "matmul") else "float32"
        chain = fresh
    else:
        _fill_ops(rng, chain, len(chain.ops) + 1)
    chain.ops = chain.ops[:4]
    return chain


def _crossover(rng: random.Random, a: Chain, b: Chain) -> Chain:
    chain = _copy(a)
    i = rng.randint(0, len(a.ops))
    j = rng.randint(0, len(b.ops))
    chain.ops = ([(o, dict(x)) for o, x in a.ops[:i]] + [(o, dict(x)) for o, x in b.ops[j:]])[:4]
    if not chain.ops:
        _fill_ops(rng, chain, 1)
    return chain


def synthesize(count: int, seed: int, validate: bool = True, max_attempts: int | None = None,
               fresh_share: float = 0.5, max_low_precision_share: float = 0.15) -> list[SynthesizedTask]:
    """`count` distinct candidate tasks from chains that are drawn fresh, mutated or recombined; seeded.

    Kept tasks have distinct op sequences (per dtype); at most `max_low_precision_share` of `count`
    use float16/bfloat16. With `validate`, only tasks whose source passes the static format checks
    (`format_problem`) are kept. Nothing is run: some candidates may still be degenerate, which the
    judge worker's probe decides when a task is created, so callers ask for spares (App.synthesize_tasks
    asks for twice as many). Attempts are bounded by `max_attempts` (default 30*count+30); fewer than
    `count` tasks come back if that is reached.
    """
    rng = random.Random(f"adaexplore-synthesis:{seed}")
    kept: list[SynthesizedTask] = []
    pool: list[Chain] = []
    seen_sources: set[str] = set()
    seen_signatures: set[tuple] = set()
    max_low = int(max_low_precision_share * count)
    attempts = max_attempts if max_attempts is not None else 30 * count + 30
    for _ in range(attempts):
        if len(kept) >= count:
            break
        r = rng.random()
        if not pool or r < fresh_share:
            chain = _fresh_chain(rng)
        else:
            # pick a parent head kind uniformly among those kept, so one lineage cannot take over
            heads = sorted({c.head for c in pool})
            parent_head = _pick(rng, heads)
            parents = [c for c in pool if c.head == parent_head]
            if r < fresh_share + (1 - fresh_share) * 0.6 or len(pool) < 2:
                chain = _mutate(rng, _pick(rng, parents))
            else:
                chain = _crossover(rng, _pick(rng, parents), _pick(rng, pool))
        n_low = sum(t.dtype != "float32" for t in kept)
        if chain.dtype != "float32" and n_low >= max_low:
            chain.dtype = "float32"
        task = _task_from_chain(chain)
        if task is None or task.source in seen_sources:
            continue
        seen_sources.add(task.source)
        signature = (task.ops, task.dtype)
        if signature in seen_signatures:
            continue
        if validate and format_problem(task) is not None:
            continue
        seen_signatures.add(signature)
        kept.append(task)
        pool.append(chain)
    return kept
