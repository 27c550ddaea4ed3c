"""Judge workers as Ray actors on several hosts, behind the local pool's interface (`--workers ray`).

One face: `RayPool` and `connect`. Ray is imported only when one of them is asked for, so a server that never
uses a cluster never imports it. Inside: pool.py (the pool of actors), actor.py (one actor: a referee).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .pool import RayPool, connect

__all__ = ["RayPool", "connect"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import pool

        return getattr(pool, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
