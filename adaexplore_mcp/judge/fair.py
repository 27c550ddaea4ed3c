"""Fair hand-out of the judge's worker slots among MCP clients.

Why: the judge has N worker slots (one or more per GPU, or CPU workers) and several MCP clients submit
evaluations concurrently. A plain FIFO queue serves evaluations in arrival order, so one client that
queues fifty evaluations, some of which hang until their timeout (up to 600 s each), holds every other
client's evaluations behind them. `FairSlots` replaces that queue with a scheduler that

* serves waiting clients round-robin (FIFO within a client), so a client with 50 queued evaluations and a
  client with 1 alternate instead of the 1 waiting behind the 50;
* caps how many slots one client may be *granted* while other clients wait (`per_client_cap`), so a client
  whose evaluations hang cannot take the slots that free up while someone else is waiting;
* never leaves a slot idle while any evaluation waits (work conserving): a lone client may use every slot.

Precise grant rule, applied each time a slot frees up or a waiter arrives, while free slots and waiters
both exist:

1. Among the clients that have waiters, in round-robin order, the first whose held count is below
   `per_client_cap` gets the slot (its oldest waiter does).
2. If no waiting client is below the cap, the first waiting client in round-robin order gets it anyway,
   so the slot is not left idle. In particular a client alone in the queue may exceed the cap.

Hence: a client is granted a slot that takes it to or past the cap only when no *other* waiting client is
below the cap (this includes the plain case "nobody else waits"). Because the default cap is N - 1 for
N >= 2, a client can be granted its N-th slot only when no other client is waiting for its first one, so
one client cannot take every slot while another client waits.

After a grant the served client moves to the back of the rotation; a client skipped for being at its cap
keeps its place, so it is first in line once it drops below the cap. A client that starts waiting joins at
the back. Every waiter is eventually served (no starvation): each grant either serves the front-most
eligible client and sends it to the back, or (rule 2) there is no one below the cap to starve.

What the scheduler cannot do is preempt: slots a client took while it was alone stay with it until they are
released. The evaluation timeout bounds that; the cap only governs new grants.

Slots are plain ints. A caller that replaces the worker behind a slot (crash, timeout, recycling) keeps
the same slot id and simply releases it when the new worker is in place; the scheduler never looks behind
the id. Clients are identified by the MCP client id string (any hashable key works); ``None`` (anonymous
callers) is one client shared by all anonymous callers.

Task affinity (within a client, never across): an acquire may name a `key` (the judge passes its task's
reference module). A worker that judged a task keeps its reference loaded and compiled with torch.compile,
which costs a cold worker about 10 s (round 1 of the GPU campaign: 62 of 96 evaluations paid 3.8 s of
reference runners and 6.8 s of compile, 10 workers, 6 tasks). So once a client is picked, its oldest waiter
whose key a free slot served lately gets that slot, ahead of older waiters of that client; and a waiter whose
key no free slot knows takes the free slot that knows the fewest keys. A waiter is passed over at most
`patience` times (default: the number of slots), then it is served next, warm or not. Affinity only orders
grants: the rules above (which client, the cap, no idle slot) are unchanged. `forget(slot)` clears a slot's
keys when its worker is replaced.

Everything runs under one lock; each waiter has its own condition on that lock, so a grant wakes exactly
the waiter it was made for.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["FairSlots", "default_cap"]


# How many recent keys a slot is credited with: a referee keeps several references within a device-memory
# budget (referee.py), so a worker stays warm for more than its last task, but not for every one.
WARM_KEYS = 4
_NOBODY = object()  # no waiting client may be served now (None is the anonymous client)

def default_cap(n_slots: int) -> int:
    """N - 1 for N >= 2 (one slot always stays reachable for another client's first evaluation), else 1."""
    return max(1, n_slots - 1)


class _Waiter:
    """One blocked `acquire`: its client, the slot granted to it (None until granted), its own condition."""

    __slots__ = ("client", "slot", "cond", "key", "passed")

    def __init__(self, client: Hashable, lock: threading.Lock, key: Hashable = None) -> None:
        self.client = client
        self.slot: int | None = None
        self.cond = threading.Condition(lock)
        self.key = key          # what a warm slot would have ready for it (None: anything will do)
        self.passed = 0         # how often a later waiter of its client was served first


class FairSlots:
    """Thread-safe fair scheduler over a fixed set of slot ids (see the module docstring for the rules).

    Invariants kept under the lock after every public call:
    * each slot id is either free or held by exactly one client, never both, never twice;
    * if any waiter exists then no slot is free (idle slots never stay idle while there is work);
    * a client is in the rotation exactly when it has at least one waiter.
    """

    def __init__(self, slots: Sequence[int], per_client_cap: int | None = None, strict: bool = False,
                 patience: int | None = None) -> None:
        """`strict`: a client never holds more than the cap, even alone, so one slot always stays for
        any other client (no preemption is needed: a client's hanging evaluations cannot take them all).
        `patience`: how often a waiter may be passed over for a later one with a warm slot (default: the
        number of slots; 0 turns affinity off)."""
        ids = list(slots)
        if not ids:
            raise ValueError("FairSlots needs at least one slot")
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate slot ids: {ids}")
        cap = default_cap(len(ids)) if per_client_cap is None else per_client_cap
        if cap < 1:
            raise ValueError(f"per_client_cap must be >= 1, got {per_client_cap}")
        self._slots = tuple(ids)
        self._cap = cap
        self._strict = strict and len(ids) > 1
        self._lock = threading.Lock()
        self._free: deque[int] = deque(ids)          # granted from the left, released to the right
        self._holder: dict[int, Hashable] = {}        # slot -> client holding it
        self._held: dict[Hashable, int] = {}          # client -> number of slots held (> 0 only)
        self._queues: dict[Hashable, deque[_Waiter]] = {}  # client -> its waiters, oldest first; never empty
        self._rotation: deque[Hashable] = deque()     # clients with waiters, in round-robin order
        self._granted = 0
        self._patience = len(ids) if patience is None else max(0, patience)
        self._warm: dict[int, deque[Hashable]] = {}    # slot -> keys it served, most recent last

    @property
    def slots(self) -> tuple[int, ...]:
        return self._slots

    @property
    def per_client_cap(self) -> int:
        return self._cap

    # -- public API -------------------------------------------------------------------------------

    def acquire(self, client: str | None, timeout: float | None = None, key: Hashable = None) -> int:
        """Block until a slot is granted to `client` and return its id; `key` asks for a slot that served
        the same key lately (see Task affinity in the module docstring).

        `timeout` None waits forever; 0 only takes a slot that can be granted at once. On timeout the
        waiter leaves the queue (no slot is ever granted to it afterwards) and TimeoutError is raised.
        If the wait is interrupted after a grant (e.g. KeyboardInterrupt), the slot is given back.
        """
        if timeout is not None and timeout < 0:
            raise ValueError(f"timeout must be >= 0 or None, got {timeout}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            waiter = _Waiter(client, self._lock, key)
            self._enqueue(waiter)
            self._dispatch()
            try:
                while waiter.slot is None:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        self._dequeue(waiter)
                        self._dispatch()
                        raise TimeoutError(
                            f"no judge worker slot for client {client!r} within {timeout} s "
                            f"({self._summary_locked()})")
                    waiter.cond.wait(remaining)
            except TimeoutError:
                raise
            except BaseException:
                if waiter.slot is None:
                    self._dequeue(waiter)
                else:
                    self._release_locked(waiter.slot)
                self._dispatch()
                raise
            return waiter.slot

    def release(self, slot: int) -> None:
        """Give `slot` back and hand it to the next waiter by the fair rule.

        Raises ValueError if the slot is not currently held (unknown id, or released twice). The scheduler
        cannot tell a release by the wrong party from a right one, since a slot is only an int; `lease()`
        pairs them for you.
        """
        with self._lock:
            self._release_locked(slot)
            self._dispatch()

    def forget(self, slot: int) -> None:
        """The worker behind `slot` was replaced: it has nothing warm any more."""
        with self._lock:
            self._warm.pop(slot, None)

    @contextmanager
    def lease(self, client: str | None, timeout: float | None = None, key: Hashable = None) -> Iterator[int]:
        """`acquire` on entry, `release` on exit, even when the body raises."""
        slot = self.acquire(client, timeout, key)
        try:
            yield slot
        finally:
            self.release(slot)

    def snapshot(self) -> dict[str, Any]:
        """A consistent picture for status and diagnostics.

        Keys: ``slots`` (all ids), ``free`` (free ids), ``per_client_cap``, ``held`` (client -> slots held),
        ``holders`` (slot -> client), ``waiting`` (client -> queued acquires), ``rotation`` (waiting clients
        in the order they will be considered), ``granted`` (total grants so far), ``warm`` (slot -> the keys
        it served lately, oldest first). Clients appear under their own key; the anonymous client is ``None``.
        """
        with self._lock:
            return {
                "slots": list(self._slots),
                "free": list(self._free),
                "per_client_cap": self._cap,
                "held": dict(self._held),
                "holders": dict(self._holder),
                "waiting": {c: len(q) for c, q in self._queues.items()},
                "rotation": list(self._rotation),
                "granted": self._granted,
                "warm": {slot: list(keys) for slot, keys in self._warm.items()},
            }

    # -- internals (call with the lock held) ------------------------------------------------------

    def _summary_locked(self) -> str:
        held = ", ".join(f"{c!r}: {n}" for c, n in self._held.items()) or "none"
        waiting = ", ".join(f"{c!r}: {len(q)}" for c, q in self._queues.items()) or "none"
        return f"{len(self._slots)} slots; held {held}; waiting {waiting}"

    def _enqueue(self, waiter: _Waiter) -> None:
        queue = self._queues.get(waiter.client)
        if queue is None:
            queue = self._queues[waiter.client] = deque()
            self._rotation.append(waiter.client)
        queue.append(waiter)

    def _dequeue(self, waiter: _Waiter) -> None:
        """Remove a waiter that was never granted (timeout, interrupt)."""
        queue = self._queues.get(waiter.client)
        if queue is None:
            return
        try:
            queue.remove(waiter)
        except ValueError:
            return
        if not queue:
            del self._queues[waiter.client]
            self._rotation.remove(waiter.client)

    def _release_locked(self, slot: int) -> None:
        try:
            client = self._holder.pop(slot)
        except KeyError:
            what = "is free (released twice?)" if slot in self._free else "is not one of this pool's slots"
            raise ValueError(f"slot {slot!r} is not held: it {what}") from None
        n = self._held[client] - 1
        if n:
            self._held[client] = n
        else:
            del self._held[client]
        self._free.append(slot)

    def _pick_client(self) -> Hashable:
        """Rule 1: first waiting client below the cap, in rotation order; rule 2: else the front one
        (never in strict mode: then nobody is served until a slot below the cap frees)."""
        for client in self._rotation:
            if self._held.get(client, 0) < self._cap:
                return client
        front = self._rotation[0]
        # Anonymous callers (None: in-process library use, tests, the demo) are never held back.
        return _NOBODY if self._strict and front is not None else front

    def _dispatch(self) -> None:
        while self._free and self._rotation:
            client = self._pick_client()
            if client is _NOBODY:
                return
            queue = self._queues[client]
            waiter, slot = self._match(queue)
            queue.remove(waiter)
            self._rotation.remove(client)
            if queue:
                self._rotation.append(client)  # served: to the back of the line
            else:
                del self._queues[client]
            self._free.remove(slot)
            self._remember(slot, waiter.key)
            self._holder[slot] = client
            self._held[client] = self._held.get(client, 0) + 1
            self._granted += 1
            waiter.slot = slot
            waiter.cond.notify()

    def _match(self, queue: deque[_Waiter]) -> tuple[_Waiter, int]:
        """Which of one client's waiters gets which free slot: the oldest waiter with a warm free slot,
        unless an older one has been passed over `patience` times (it goes first, warm or not); else the
        oldest waiter, on the free slot that knows the fewest keys (a fresh worker before one whose
        references a waiting task may want)."""
        if self._patience == 0:
            return queue[0], self._free[0]
        chosen, slot = queue[0], None
        for waiter in queue:
            slot = self._warm_slot(waiter.key)
            if slot is not None or waiter.passed >= self._patience:
                chosen = waiter
                break
        if slot is None:
            slot = min(self._free, key=lambda s: len(self._warm.get(s, ())))
        for waiter in queue:
            if waiter is chosen:
                break
            waiter.passed += 1
        return chosen, slot

    def _warm_slot(self, key: Hashable) -> int | None:
        """The free slot that served `key` most recently, if any (never for key None)."""
        if key is None:
            return None
        best, best_rank = None, -1
        for slot in self._free:
            keys = self._warm.get(slot)
            if keys and key in keys:
                rank = list(keys).index(key)
                if rank > best_rank:
                    best, best_rank = slot, rank
        return best

    def _remember(self, slot: int, key: Hashable) -> None:
        if key is None:
            return
        keys = self._warm.setdefault(slot, deque(maxlen=WARM_KEYS))
        if key in keys:
            keys.remove(key)
        keys.append(key)
