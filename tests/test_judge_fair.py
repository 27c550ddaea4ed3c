"""FairSlots: the judge's slot scheduler across MCP clients (pure threading, no torch, no workers).

Why these tests: with a plain FIFO queue one client's hanging evaluations held every other client's behind
them. These check the properties that prevent that (round-robin across clients, the per-client cap while
others wait, no idle slot while work waits) and the bookkeeping the pool relies on (no slot granted twice,
clean timeouts, double release rejected). Ordering is made deterministic by waiting, via `snapshot()`,
until each waiter is queued before queuing the next; no sleep is longer than a few milliseconds.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest

from adaexplore_mcp.judge.fair import FairSlots, default_cap

WAIT_S = 3.0  # generous upper bound for anything that should happen "at once"


def wait_until(pred: Callable[[], bool], what: str = "condition") -> None:
    deadline = time.monotonic() + WAIT_S
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def waiting(fs: FairSlots, client: str | None) -> int:
    return fs.snapshot()["waiting"].get(client, 0)


def held(fs: FairSlots, client: str | None) -> int:
    return fs.snapshot()["held"].get(client, 0)


class Job:
    """One evaluation on its own thread: acquire for `client`, note the slot, hold until `finish()`.

    With `hold=False` it releases as soon as it is granted (and appends its name to `order`, if given).
    """

    def __init__(self, fs: FairSlots, client: str | None, name: str = "", *, hold: bool = True,
                 order: list[str] | None = None, timeout: float | None = WAIT_S, key: str | None = None) -> None:
        self.fs, self.client, self.name, self.hold, self.order = fs, client, name, hold, order
        self.key = key
        self.timeout = timeout
        self.slot: int | None = None
        self.error: BaseException | None = None
        self.granted = threading.Event()
        self._finish = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.slot = self.fs.acquire(self.client, timeout=self.timeout, key=self.key)
        except BaseException as e:  # noqa: BLE001 - surfaced by the test
            self.error = e
            self.granted.set()
            return
        if self.order is not None:
            self.order.append(self.name)
        self.granted.set()
        if self.hold:
            self._finish.wait(WAIT_S)
        self.fs.release(self.slot)

    def start_queued(self) -> Job:
        """Start and return once this job is queued (or already granted), so queue order is the call order."""
        before = waiting(self.fs, self.client)
        granted_before = self.fs.snapshot()["granted"]
        self.thread.start()
        wait_until(lambda: waiting(self.fs, self.client) > before or self.granted.is_set()
                   or self.fs.snapshot()["granted"] > granted_before, f"{self.name} to queue")
        return self

    def finish(self) -> None:
        self._finish.set()
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()


def check_invariants(snap: dict) -> None:
    slots, free, holders = set(snap["slots"]), snap["free"], snap["holders"]
    assert len(free) == len(set(free)), f"a slot is free twice: {free}"
    assert not set(free) & set(holders), f"a slot is both free and held: {snap}"
    assert set(free) | set(holders) == slots, f"a slot went missing: {snap}"
    counts: dict = {}
    for client in holders.values():
        counts[client] = counts.get(client, 0) + 1
    assert counts == snap["held"], snap
    if snap["waiting"]:
        assert not free, f"a slot is idle while work waits: {snap}"
    assert set(snap["rotation"]) == set(snap["waiting"]) and len(snap["rotation"]) == len(snap["waiting"])


# -- construction --------------------------------------------------------------------------------------


def test_default_cap_and_validation() -> None:
    assert default_cap(1) == 1 and default_cap(2) == 1 and default_cap(4) == 3
    assert FairSlots([0]).per_client_cap == 1
    assert FairSlots([0, 1]).per_client_cap == 1
    assert FairSlots(range(8)).per_client_cap == 7
    assert FairSlots([0, 1, 2], per_client_cap=2).per_client_cap == 2
    with pytest.raises(ValueError):
        FairSlots([])
    with pytest.raises(ValueError):
        FairSlots([0, 0])
    with pytest.raises(ValueError):
        FairSlots([0, 1], per_client_cap=0)
    with pytest.raises(ValueError):
        FairSlots([0]).acquire("a", timeout=-1)


# -- a lone client -------------------------------------------------------------------------------------


def test_single_client_uses_every_slot_past_the_cap() -> None:
    fs = FairSlots([7, 3, 11])  # slot ids are arbitrary ints; default cap 2
    got = [fs.acquire("a", timeout=0) for _ in range(3)]
    assert sorted(got) == [3, 7, 11]
    assert held(fs, "a") == 3  # over the cap: nobody else was waiting
    with pytest.raises(TimeoutError):
        fs.acquire("a", timeout=0)
    for s in got:
        fs.release(s)
    snap = fs.snapshot()
    assert sorted(snap["free"]) == [3, 7, 11] and snap["held"] == {} and snap["waiting"] == {}


def test_lease_releases_on_exception_and_a_replaced_slot_is_reused() -> None:
    fs = FairSlots([0])
    with pytest.raises(RuntimeError):
        with fs.lease("a") as slot:
            assert slot == 0
            raise RuntimeError("worker crashed")  # the pool would replace the worker behind slot 0 here
    assert fs.snapshot()["free"] == [0]
    with fs.lease("b", timeout=0) as slot:  # the same id serves again, whatever worker is behind it
        assert slot == 0


# -- round-robin ---------------------------------------------------------------------------------------


def test_two_clients_alternate_round_robin() -> None:
    fs = FairSlots([0])
    blocker = fs.acquire("blocker")
    order: list[str] = []
    jobs = [Job(fs, "a", f"a{i}", hold=False, order=order).start_queued() for i in range(4)]
    jobs += [Job(fs, "b", f"b{i}", hold=False, order=order).start_queued() for i in range(4)]
    assert fs.snapshot()["waiting"] == {"a": 4, "b": 4}
    fs.release(blocker)
    for j in jobs:
        j.finish()
    # FIFO within a client, alternating across clients, although all of a's were queued first.
    assert order == ["a0", "b0", "a1", "b1", "a2", "b2", "a3", "b3"]


def test_a_client_with_one_evaluation_does_not_wait_behind_fifty() -> None:
    fs = FairSlots([0])
    blocker = fs.acquire("blocker")
    order: list[str] = []
    jobs = [Job(fs, "bulk", f"bulk{i}", hold=False, order=order).start_queued() for i in range(50)]
    jobs.append(Job(fs, None, "anon", hold=False, order=order).start_queued())  # None: the anonymous client
    fs.release(blocker)
    for j in jobs:
        j.finish()
    assert order.index("anon") == 1
    assert [n for n in order if n != "anon"] == [f"bulk{i}" for i in range(50)]


# -- hogging, the cap, and no idle slots ---------------------------------------------------------------


def test_a_freed_slot_goes_to_the_other_client_not_the_hogs_queue() -> None:
    fs = FairSlots([0, 1])  # cap 1
    hung = fs.acquire("hog")
    busy = fs.acquire("hog")  # allowed past the cap: nobody else waits
    hog_jobs = [Job(fs, "hog", f"hog{i}").start_queued() for i in range(3)]
    other = Job(fs, "other", "other").start_queued()
    assert fs.snapshot()["rotation"] == ["hog", "other"]  # the hog is ahead in line ...
    fs.release(busy)
    assert other.granted.wait(WAIT_S)  # ... yet the freed slot goes to the other client at once
    assert other.slot == busy and other.error is None
    snap = fs.snapshot()
    assert snap["waiting"] == {"hog": 3} and snap["holders"] == {hung: "hog", busy: "other"}
    other.finish()  # nobody else waits now: the hog's queue may use the slot
    hog_jobs[0].granted.wait(WAIT_S)
    assert hog_jobs[0].slot == busy
    for j in hog_jobs:
        j.finish()
    fs.release(hung)
    check_invariants(fs.snapshot())


def test_client_with_a_hung_slot_cannot_stop_another_client_completing_ten_evaluations() -> None:
    fs = FairSlots([0, 1])  # cap 1
    hung = fs.acquire("hog")  # hangs "forever" (until the end of the test)
    stop = threading.Event()
    hog_done = [0]
    errors: list[BaseException] = []

    def hog_loop() -> None:  # the hog keeps many more evaluations queued all the time
        try:
            while not stop.is_set():
                with fs.lease("hog", timeout=WAIT_S):
                    hog_done[0] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    hogs = [threading.Thread(target=hog_loop, daemon=True) for _ in range(6)]
    for t in hogs:
        t.start()
    wait_until(lambda: hog_done[0] >= 5 and waiting(fs, "hog") >= 2, "the hog to saturate the free slot")
    completed = 0
    for _ in range(10):
        with fs.lease("other", timeout=WAIT_S) as slot:  # would raise TimeoutError if starved
            assert slot != hung
            completed += 1
    stop.set()
    for t in hogs:
        t.join(WAIT_S)
    assert completed == 10 and not errors
    assert fs.snapshot()["holders"] == {hung: "hog"}
    fs.release(hung)
    check_invariants(fs.snapshot())


def test_cap_is_respected_while_others_wait_and_lifted_when_they_do_not() -> None:
    fs = FairSlots([0, 1, 2, 3], per_client_cap=2)
    mine = [fs.acquire("a") for _ in range(3)]  # 3 > cap, allowed while alone
    x = fs.acquire("x")
    a_jobs = [Job(fs, "a", f"a{i}").start_queued() for i in range(2)]
    b_jobs = [Job(fs, "b", f"b{i}").start_queued() for i in range(2)]
    assert fs.snapshot()["rotation"] == ["a", "b"]

    fs.release(x)  # a is first in line but over its cap: b gets it
    assert b_jobs[0].granted.wait(WAIT_S) and b_jobs[0].slot == x
    assert fs.snapshot()["rotation"] == ["a", "b"]  # a keeps its place at the front

    fs.release(mine[0])  # a now holds 2 == cap: still skipped for b
    assert b_jobs[1].granted.wait(WAIT_S) and b_jobs[1].slot == mine[0]
    assert held(fs, "a") == 2 and held(fs, "b") == 2 and waiting(fs, "a") == 2

    fs.release(mine[1])  # a below cap: its oldest waiter
    assert a_jobs[0].granted.wait(WAIT_S) and a_jobs[0].slot == mine[1]
    assert held(fs, "a") == 2

    b_jobs[0].finish()  # only a waits now: it may go past the cap, the slot does not stay idle
    assert a_jobs[1].granted.wait(WAIT_S) and a_jobs[1].slot == x
    assert held(fs, "a") == 3
    check_invariants(fs.snapshot())
    for j in a_jobs + b_jobs[1:]:
        j.finish()
    fs.release(mine[2])
    snap = fs.snapshot()
    check_invariants(snap)
    assert snap["held"] == {} and len(snap["free"]) == 4


def test_no_idle_slot_when_every_waiting_client_is_at_its_cap() -> None:
    fs = FairSlots([0, 1, 2], per_client_cap=1)
    a, b, c = fs.acquire("a"), fs.acquire("b"), fs.acquire("c")
    ja = Job(fs, "a", "a").start_queued()
    jb = Job(fs, "b", "b").start_queued()
    fs.release(c)  # a and b are both at the cap; the slot goes to the front of the line anyway
    assert ja.granted.wait(WAIT_S) and ja.slot == c
    assert fs.snapshot()["waiting"] == {"b": 1}
    fs.release(a)
    assert jb.granted.wait(WAIT_S) and jb.slot == a
    ja.finish()
    jb.finish()
    fs.release(b)
    check_invariants(fs.snapshot())


# -- timeouts and misuse -------------------------------------------------------------------------------


def test_timeout_leaves_the_queue_cleanly() -> None:
    fs = FairSlots([0])
    s = fs.acquire("a")
    with pytest.raises(TimeoutError):
        fs.acquire("b", timeout=0)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="client 'b'"):
        fs.acquire("b", timeout=0.02)
    assert time.monotonic() - t0 < 1.0
    snap = fs.snapshot()
    assert snap["waiting"] == {} and snap["rotation"] == []
    fs.release(s)  # nobody is left to grant it to: it stays free
    assert fs.snapshot()["free"] == [0] and fs.snapshot()["held"] == {}


def test_a_timed_out_waiter_in_the_middle_of_the_queue_is_skipped() -> None:
    fs = FairSlots([0])
    s = fs.acquire("a")
    first = Job(fs, "b", "b").start_queued()
    quitter = Job(fs, "c", "c", timeout=0.02).start_queued()
    last = Job(fs, "b", "b2").start_queued()
    assert quitter.granted.wait(WAIT_S) and isinstance(quitter.error, TimeoutError)
    assert fs.snapshot()["waiting"] == {"b": 2}
    fs.release(s)
    assert first.granted.wait(WAIT_S) and first.slot == 0
    first.finish()
    assert last.granted.wait(WAIT_S) and last.slot == 0
    last.finish()
    check_invariants(fs.snapshot())
    assert fs.snapshot()["free"] == [0]


def test_double_release_and_unknown_slot_raise() -> None:
    fs = FairSlots([0, 1])
    s = fs.acquire("a")
    fs.release(s)
    with pytest.raises(ValueError, match="released twice"):
        fs.release(s)
    with pytest.raises(ValueError, match="not one of"):
        fs.release(42)
    snap = fs.snapshot()
    check_invariants(snap)
    assert sorted(snap["free"]) == [0, 1]


# -- stress --------------------------------------------------------------------------------------------


def test_many_threads_never_share_a_slot() -> None:
    fs = FairSlots([0, 1, 2])
    n_threads, rounds = 8, 50
    clients = ["a", "b", "c", None]
    barrier = threading.Barrier(n_threads + 1)
    in_use: set[int] = set()
    guard = threading.Lock()
    errors: list[BaseException] = []
    grants = [0]
    timeouts = [0]
    stop = threading.Event()

    def worker(i: int) -> None:
        rng = random.Random(i)
        client = clients[i % len(clients)]
        try:
            barrier.wait(WAIT_S)
            for _ in range(rounds):
                # some acquires use a tiny timeout, to exercise waiters leaving mid-queue
                timeout = 0.0005 if rng.random() < 0.2 else WAIT_S
                try:
                    slot = fs.acquire(client, timeout=timeout, key=rng.choice(["A", "B", None]))
                except TimeoutError:
                    with guard:
                        timeouts[0] += 1
                    continue
                with guard:
                    assert slot not in in_use, f"slot {slot} granted twice"
                    in_use.add(slot)
                    grants[0] += 1
                if rng.random() < 0.3:
                    time.sleep(0.0002)
                with guard:
                    in_use.remove(slot)
                fs.release(slot)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def watcher() -> None:
        try:
            while not stop.is_set():
                check_invariants(fs.snapshot())
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n_threads)]
    w = threading.Thread(target=watcher, daemon=True)
    for t in threads:
        t.start()
    w.start()
    barrier.wait(WAIT_S)
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    stop.set()
    w.join(WAIT_S)
    assert not errors, errors
    assert grants[0] + timeouts[0] == n_threads * rounds
    snap = fs.snapshot()
    check_invariants(snap)
    assert sorted(snap["free"]) == [0, 1, 2] and snap["held"] == {} and snap["waiting"] == {}
    assert snap["granted"] == grants[0]


def test_strict_mode_always_keeps_a_slot_for_another_client() -> None:
    """A client whose evaluations hang holds at most all but one slot, even when alone; a newcomer is
    served at once from the slot kept back."""
    slots = FairSlots([0, 1], strict=True)
    first = slots.acquire("hog")
    with pytest.raises(TimeoutError):
        slots.acquire("hog", timeout=0.02)  # alone, yet the second slot stays back
    other = slots.acquire("polite", timeout=0.5)
    assert {first, other} == {0, 1}
    slots.release(other)
    slots.release(first)
    assert FairSlots([0], strict=True).acquire("alone", timeout=0.1) == 0  # one slot: nothing to keep back


# -- task affinity -------------------------------------------------------------------------------------


def test_a_free_slot_that_served_the_task_is_chosen_over_an_older_free_slot() -> None:
    fs = FairSlots([0, 1, 2])
    first = fs.acquire("c", key="A")
    fs.release(first)  # free now: 1, 2, then the slot that served A
    for_b = fs.acquire("c", key="B")
    assert for_b != first  # a new task takes a slot that knows nothing, not A's
    assert fs.acquire("c", key="A") == first  # A's slot, although it was freed last
    assert fs.acquire("c", key="A", timeout=0) not in (first, for_b)  # no warm slot left: the cold one
    assert fs.snapshot()["warm"][first] == ["A"] and fs.snapshot()["warm"][for_b] == ["B"]


def test_a_released_warm_slot_goes_to_the_oldest_waiter_of_its_task_then_to_the_one_passed_over() -> None:
    fs = FairSlots([0, 1])
    slot_a = fs.acquire("c", key="A")
    slot_b = fs.acquire("c", key="B")
    order: list[str] = []
    wants_c = Job(fs, "c", "C", hold=False, order=order, key="C").start_queued()
    wants_a = Job(fs, "c", "A", hold=False, order=order, key="A").start_queued()
    fs.release(slot_a)  # warm for A: the younger A waiter goes first, on it; then C, passed over once
    for job in (wants_a, wants_c):
        job.finish()
    assert order == ["A", "C"]
    assert wants_a.slot == slot_a and wants_c.slot == slot_a
    fs.release(slot_b)
    check_invariants(fs.snapshot())


def test_a_waiter_is_passed_over_at_most_patience_times() -> None:
    fs = FairSlots([0, 1], patience=1)
    slot_a = fs.acquire("c", key="A")
    held_b = fs.acquire("c", key="B")
    cold = Job(fs, "c", "cold", key="C").start_queued()
    warm1 = Job(fs, "c", "warm1", key="A").start_queued()
    warm2 = Job(fs, "c", "warm2", key="A").start_queued()
    fs.release(slot_a)
    assert warm1.granted.wait(WAIT_S) and warm1.slot == slot_a  # `cold` passed over once ...
    warm1.finish()
    assert cold.granted.wait(WAIT_S) and cold.slot == slot_a  # ... and not again, though warm2 fits A's slot
    assert not warm2.granted.is_set()
    cold.finish()
    assert warm2.granted.wait(WAIT_S)
    warm2.finish()
    fs.release(held_b)
    check_invariants(fs.snapshot())


def test_affinity_never_overrides_fairness_between_clients() -> None:
    fs = FairSlots([0])
    slot = fs.acquire("x", key="A")
    order: list[str] = []
    jobs = [Job(fs, "b", "b-cold", hold=False, order=order, key="B").start_queued(),
            Job(fs, "a", "a-warm", hold=False, order=order, key="A").start_queued()]
    fs.release(slot)  # b is first in the rotation: it is served first, although the slot is warm for A
    for job in jobs:
        job.finish()
    assert order == ["b-cold", "a-warm"]


def test_a_forgotten_slot_is_cold_and_patience_zero_is_first_in_first_out() -> None:
    fs = FairSlots([0, 1])
    slot = fs.acquire("c", key="A")
    fs.release(slot)
    fs.forget(slot)  # its worker was replaced
    assert slot not in fs.snapshot()["warm"]
    plain = FairSlots([0, 1], patience=0)
    first = plain.acquire("c", key="A")
    plain.release(first)
    assert plain.acquire("c", key="A") != first  # the oldest free slot, as without affinity
