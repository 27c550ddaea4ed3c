"""Did the candidate rebind torch or triton globals? Then this worker must not judge anyone else.

Candidate code runs inside the worker, so a candidate that monkeypatches `torch.randn`, a Tensor
method or Triton's launch path would corrupt the checks of every later candidate in that worker.
We snapshot the identities of the attributes of the namespaces the judge relies on before the
candidate is imported and compare after it has run; a change discards the worker after this
evaluation (and says so). New attributes are ignored: torch adds submodules lazily.
This is a tripwire, not a sandbox: a hostile candidate can still fool the evaluation it is part of.
"""

from __future__ import annotations

from typing import Any


def _namespaces() -> dict[str, Any]:
    import torch
    import torch.nn.functional as F
    from triton.runtime.jit import JITFunction

    spaces: dict[str, Any] = {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.functional": F,
                              "torch.nn.Module": torch.nn.Module, "torch.linalg": torch.linalg,
                              "torch.cuda": torch.cuda, "JITFunction": JITFunction}
    try:
        from triton.runtime.interpreter import InterpretedFunction

        spaces["InterpretedFunction"] = InterpretedFunction
    except ImportError:  # pragma: no cover
        pass
    return spaces


def snapshot() -> dict[str, int]:
    """Identities of the functions, classes and descriptors (not plain state: torch.cuda flips flags lazily)."""
    return {f"{name}.{key}": id(value) for name, space in _namespaces().items()
            for key, value in list(vars(space).items())
            if callable(value) or isinstance(value, (staticmethod, classmethod, property))}


def changed(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(k for k, v in before.items() if after.get(k, v) != v or k not in after)
