"""Relevance of a rule to a query or task: token overlap, simple and deterministic.

Query tokens come from free text and from the task's reference source (torch ops mapped to the Triton
APIs a kernel for them uses: matmul -> tl.dot, softmax -> tl.max/tl.sum/tl.exp...). Rule tokens come
from the rule's text, its signatures and the tl APIs they name. A search step ranks rules by its own
context instead (`step_ranking`: the chain's failures, the parent kernel's tl APIs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .signature import triton_apis

_WORD = re.compile(r"tl\.[A-Za-z_][\w.]*|[A-Za-z_][A-Za-z0-9_]*")
_STOP = frozenset("""
the and you cannot always never with for use must not are can its into from that this than then when
only inside kernel kernels value values pass make give before after each every call calls function
functions instead has have any all one two get got type object name none self return torch nn def
class import model forward super init inputs outputs input output shape size dim compilationerror
typeerror valueerror error
""".split())

_DOT = {"tl.dot", "dot"}
_REDUCE = {"tl.sum", "tl.max", "reduce", "axis", "tl.exp"}
_ACT = {"tl.exp", "tl.maximum", "tl.where", "tl.erf", "tl.sqrt", "exp", "relu", "tanh", "gelu", "tl.relu", "tl.tanh"}
OP_HINTS: dict[str, set[str]] = {
    **{op: _DOT for op in ("matmul", "mm", "bmm", "linear", "conv1d", "conv2d", "conv3d", "conv_transpose2d",
                           "convtranspose2d", "conv", "einsum", "addmm", "baddbmm", "gemm")},
    **{op: _REDUCE for op in ("softmax", "log_softmax", "logsumexp", "sum", "mean", "var", "std", "norm",
                              "layer_norm", "layernorm", "group_norm", "groupnorm", "batch_norm", "batchnorm2d",
                              "rms_norm", "amax", "amin", "argmax", "argmin", "cumsum", "max", "min", "prod")},
    **{op: _ACT for op in ("relu", "gelu", "tanh", "sigmoid", "silu", "swish", "mish", "elu", "leaky_relu",
                           "hardtanh", "hardswish", "softplus", "exp", "log", "sqrt", "rsqrt", "erf", "pow")},
    **{op: {"tl.trans", "tl.permute", "trans"} for op in ("transpose", "permute", "t")},
    **{op: {"tl.reshape", "tl.view", "reshape"} for op in ("view", "reshape", "flatten", "unsqueeze", "squeeze")},
    **{op: {"tl.where", "tl.clamp", "tl.where"} for op in ("where", "clamp", "clip", "masked_fill")},
    **{op: {"tl.<dtype>", "dtype", "float16", "bfloat16"} for op in ("half", "bfloat16", "float16", "to")},
    **{op: {"tl.max", "tl.where", "reduce"} for op in ("maxpool2d", "max_pool2d", "avgpool2d", "avg_pool2d")},
}


def tokens(text: str) -> set[str]:
    out = set()
    for word in _WORD.findall(text or ""):
        w = word.lower()
        if w.startswith("tl."):
            out.add(w)
            continue
        for part in [w, *w.split("_")]:
            if len(part) >= 3 and part not in _STOP:
                out.add(part)
    return out | {a.lower() for a in triton_apis(text or "")}


def task_tokens(source: str) -> set[str]:
    """The ops a reference source calls (torch.x, F.x, nn.X, .x()) plus the Triton APIs they suggest."""
    ops = set()
    for m in re.finditer(r"(?:torch|F|nn|functional)\.([A-Za-z_]\w*)|\.([a-z_]\w*)\(", source or ""):
        ops.add((m.group(1) or m.group(2)).lower())
    out = set()
    for op in ops:
        if len(op) >= 3 and op not in _STOP:
            out.add(op)
        out |= OP_HINTS.get(op, set())
    return out


def score(query: set[str], rule_tokens: set[str]) -> int:
    return len(query & rule_tokens)


def step_ranking(rules: Sequence[tuple[str, str]], named: Sequence[str], failures: Sequence[str],
                 kernel_source: str, task_rule_ids: Sequence[str] = ()) -> list[int]:
    """Indices of `rules` ((rule_id, text) pairs) most relevant to one search step first.

    Why this order: a rule the chain's own failures fell under (`named`, newest failure first) is the lesson
    the next kernel most needs; then rules sharing words with those failures' error texts; then the rules of
    this task's own failure clusters (`task_rule_ids`, most frequent first: the mistakes kernels for this task
    made before, in any search); then rules about the tl APIs the parent kernel uses (a kernel with tl.arange
    needs the tl.arange rule, not the tl.dot one). Ties keep the given order (the memory's: task relevance,
    then this machine's most frequent failures), so the result is stable.
    """
    first = {rule_id: k for k, rule_id in enumerate(dict.fromkeys(named))}
    own = {rule_id: k for k, rule_id in enumerate(dict.fromkeys(task_rule_ids))}
    fail = set().union(*(tokens(t) for t in failures)) if failures else set()
    apis = {a.lower() for a in triton_apis(kernel_source or "")}

    def key(i: int) -> tuple[int, int, int, int, int]:
        rule_id, text = rules[i]
        rtoks = tokens(text)
        return (first.get(rule_id, len(first)), -score(fail, rtoks), own.get(rule_id, len(own)),
                -score(apis, rtoks), i)

    return sorted(range(len(rules)), key=key)
