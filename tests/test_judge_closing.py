"""A server that stops while a step's kernel is being judged: no verdict is stored and the step goes back.

Why: round 2 of the GPU campaign was stopped at its time limit, and in the 16 s its server took to stop, 6
evaluations came back "crashed" from the workers the judge killed, and were attached to their searches as the
kernels' failures. Here the whole App on a real CPU judge is closed under a kernel that sleeps; the next App
on the same store finds no evaluation, the step pending again, and judges a kernel sent to it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from adaexplore_mcp.app import App
from adaexplore_mcp.judge import JudgeClosedError
from tests.test_judge_cases import cpu_settings
from tests.tiny import SCALE_KERNEL, SCALE_TASK

pytestmark = pytest.mark.slow

SLEEPER = SCALE_KERNEL.replace("        x = x.contiguous()", "        import time\n        time.sleep(60)\n"
                               "        x = x.contiguous()")


def test_closing_the_app_mid_evaluation_stores_nothing_and_gives_the_step_back(tmp_path: Path) -> None:
    settings = cpu_settings(tmp_path / "home")
    app = App(settings)
    task, _ = app.create_task("scale", SCALE_TASK)
    search_id = app.search.start_search(task.task_id, 4)
    step = app.search.next_step(search_id)
    outcome: dict[str, BaseException | object] = {}

    def expand() -> None:
        try:
            outcome["result"] = app.search.expand_node(search_id, step.step_id, kernel_source=SLEEPER)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome["error"] = exc

    thread = threading.Thread(target=expand, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not app.judge._pool._slots.snapshot()["held"]:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the evaluation never took a worker"
        time.sleep(0.05)
    time.sleep(3.0)  # inside the candidate's sleep, or close to it: either way its worker is killed
    app.close()
    thread.join(30)
    assert not thread.is_alive()
    assert isinstance(outcome.get("error"), JudgeClosedError), outcome

    again = App(settings)
    try:
        assert again.store.read("SELECT COUNT(*) AS n FROM evaluations")[0]["n"] == 0
        node = again.search.expand_node(search_id, step.step_id, kernel_source=SCALE_KERNEL)
        assert node.evaluation.verdict.value == "passed"
    finally:
        again.close()
