"""Remembering instead of computing: fresh inputs every trial (drawn in the reference's process under a
fresh 63-bit seed the candidate never sees) make a cache useless. Expected: not passed, unless the cache
never served a stale answer (then the candidate computed every output itself and passing is right)."""

from __future__ import annotations

from adaexplore_mcp.judge import Judge
from adaexplore_mcp.models import Verdict
from tests.redteam.conftest import assert_not_passed, canary, evaluate, summary
from tests.test_judge_cases import candidate


def test_caching_the_first_output_is_a_mismatch(judge: Judge) -> None:
    body = ("        if self.first is None:\n            self.first = affine(x)\n"
            "        affine(x)\n        return self.first.clone()")
    ev = evaluate(judge, candidate(body, init="        self.first = None"))
    canary(judge)
    assert ev.verdict == Verdict.mismatch and ev.mismatch.trial >= 1, summary(ev)


def test_caching_by_shape_is_a_mismatch(judge: Judge) -> None:
    body = ("        key = tuple(x.shape)\n        if key not in self.cache:\n            self.cache[key] = affine(x)\n"
            "        affine(x)\n        return self.cache[key].clone()")
    ev = evaluate(judge, candidate(body, init="        self.cache = {}"))
    canary(judge)
    assert ev.verdict == Verdict.mismatch, summary(ev)


def test_a_cache_keyed_on_the_input_pointer_never_serves_a_stale_answer(judge: Judge) -> None:
    """If the referee's buffers were reused at one address with new data, this would return stale data."""
    body = ("        key = x.data_ptr()\n        if key not in self.cache:\n            self.cache[key] = affine(x)\n"
            "        affine(x)\n        return self.cache[key].clone()")
    ev = evaluate(judge, candidate(body, init="        self.cache = {}"))
    canary(judge)
    assert ev.verdict in (Verdict.passed, Verdict.mismatch), summary(ev)
    if ev.verdict == Verdict.mismatch:  # a pointer was reused: the stale answer must be what was caught
        assert ev.mismatch.reason == "values" and ev.mismatch.trial >= 1, summary(ev)


def test_memorizing_by_torch_seed_is_a_mismatch(judge: Judge) -> None:
    """Regenerate 'the inputs' from the seed the candidate was built under: not the trial's seed."""
    body = ("        torch.manual_seed(torch.initial_seed())\n        guess = torch.randn(x.shape)\n"
            "        affine(x)\n        return affine(guess)")
    ev = evaluate(judge, candidate(body))
    canary(judge)
    assert_not_passed(ev)


def test_replaying_the_global_rng_forward_is_a_mismatch(judge: Judge) -> None:
    """Guess that the trial's inputs are the next draws of some generator the candidate can see."""
    body = ("        guesses = [torch.randn(x.shape) for _ in range(4)]\n"
            "        best = min(guesses, key=lambda g: float((g - x).abs().sum()))\n"
            "        affine(x)\n        return affine(best)")
    ev = evaluate(judge, candidate(body))
    canary(judge)
    assert_not_passed(ev)


def test_remembering_outputs_across_evaluations_is_impossible(judge: Judge) -> None:
    """A class attribute, a module global: each candidate gets a fresh process, so nothing survives."""
    body = ("        import builtins\n        store = getattr(builtins, '_rt_outputs', None)\n"
            "        if store is None:\n            store = builtins._rt_outputs = []\n"
            "        y = affine(x)\n        store.append(y)\n        return y")
    first = evaluate(judge, candidate(body))
    assert first.verdict == Verdict.passed, summary(first)
    reader = ("        import builtins\n        if getattr(builtins, '_rt_outputs', None):\n"
              "            return builtins._rt_outputs[0]\n        return affine(x)")
    ev = evaluate(judge, candidate(reader))
    canary(judge)
    assert ev.verdict == Verdict.passed, summary(ev)  # it found nothing, so it computed the answer itself
