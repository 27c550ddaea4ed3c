"""create_task: a task is (name, source, small_shapes); size constants (chained, tuple); small_shapes
suggested for large inputs under the CPU interpreter, statically (the task's code never runs here)."""

from __future__ import annotations

import json
import textwrap
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import torch
from mcp import Client

from adaexplore_mcp.app import App
from adaexplore_mcp.config import JudgeLimits, Settings
from adaexplore_mcp.models import TaskProbe
from adaexplore_mcp.server import build_server
from adaexplore_mcp.tasks.format import (
    TaskFormatError, apply_shapes, check_small_shapes, import_file, integer_constants, write_module_file,
)
from adaexplore_mcp.tasks.shape_advice import (
    SMALL_INPUT_ELEMENTS, large_input_warning, probe_failure_advice, suggest_small_shapes, total_elements,
)
from adaexplore_mcp.tasks.library import builtin_task, builtin_tasks
from tests.tiny import SCALE_TASK

# 1024 x 2048 inputs: 2M elements, over the 1e6 line (the probe itself, plain torch on the CPU, is quick).
LARGE_TASK = SCALE_TASK.replace("n_rows = 4", "n_rows = 1024").replace("n_cols = 32", "n_cols = 2048")

CHAINED_TASK = '''
import torch
import torch.nn as nn

batch_size = 2
height = width = 1024
a, b = 3, 5
(c, d) = (7, 11)
scale = 0.5
label = "x"


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y):
        return x * self.scale + y.sum()


def get_inputs():
    return [torch.randn(batch_size, height, width), torch.randn(a, b, c, d)]


def get_init_inputs():
    return [scale]
'''

SUGGESTED = re.compile(r"small_shapes=(\{[^}]*\})")


def suggested(text: str) -> dict[str, int]:
    match = SUGGESTED.search(text)
    assert match, text
    return json.loads(match.group(1))


def load(tmp_path: Path, source: str, tag: str):
    name, path = write_module_file(tmp_path, tag, source)
    return import_file(f"{name}_{tag}", path)


def input_elements(module, shapes: dict[str, int] | None = None, meta: bool = False) -> int:
    apply_shapes(module, shapes or {})
    with torch.device("meta" if meta else "cpu"):
        return total_elements([list(x.shape) for x in module.get_inputs()])


# -- size constants: chained and tuple assignments -----------------------------------------------

def test_chained_and_tuple_integer_constants_are_size_constants_and_others_are_not():
    consts = integer_constants(CHAINED_TASK)
    assert consts == {"batch_size": 2, "height": 1024, "width": 1024, "a": 3, "b": 5, "c": 7, "d": 11}
    more = integer_constants("x, f = 1, 2.0\n[p, q] = [4, 5]\nn: int = 6\nt = True\ns, *r = 1, 2, 3\nu = v = 'w'\n")
    assert more == {"x": 1, "p": 4, "q": 5, "n": 6}


def test_integers_made_of_literals_are_knobs_and_absurd_ones_are_refused():
    source = "M = 256\nK = 131072 * 4\nS = 1 << 16\nP = 2 ** 10\nH = 10 ** 10 ** 10\nD = M * 2\nZ = 7 // 0\n"
    assert integer_constants(source) == {"M": 256, "K": 524288, "S": 65536, "P": 1024}
    matmul = ("import torch\nM = 256\nN = 256\nK = 131072 * 4\n\ndef get_inputs():\n"
              "    return [torch.rand(M, K), torch.rand(K, N)]\n")  # KernelBench level 1, problem 6
    suggestion = suggest_small_shapes(matmul)
    assert suggestion.small_shapes["K"] < 524288 and min(suggestion.small_shapes.values()) >= 64
    assert suggestion.small_elements <= SMALL_INPUT_ELEMENTS


def test_small_shapes_accept_chained_and_tuple_names_and_reject_non_integers():
    shapes = {"height": 8, "width": 4, "a": 1, "d": 2}
    assert check_small_shapes(CHAINED_TASK, shapes) == shapes
    for bad in ({"scale": 1}, {"label": 1}):
        with pytest.raises(TaskFormatError, match="not top-level integer constants") as info:
            check_small_shapes(CHAINED_TASK, bad)
        assert "height" in str(info.value) and "width" in str(info.value) and "'c'" in str(info.value)


def test_apply_shapes_sets_each_name_of_a_chained_or_tuple_assignment(tmp_path: Path):
    module = load(tmp_path, CHAINED_TASK, "apply")
    apply_shapes(module, {"height": 4, "width": 6, "a": 1, "b": 2, "c": 3, "d": 4})
    assert [list(x.shape) for x in module.get_inputs()] == [[2, 4, 6], [1, 2, 3, 4]]
    apply_shapes(module, {"height": 5})  # a name not given keeps its own value
    assert list(module.get_inputs()[0].shape) == [2, 5, 6]


# -- suggesting small_shapes (static: no code of the task runs) -----------------------------------

def test_the_suggestion_shrinks_the_largest_constants_first_down_to_about_65k(tmp_path: Path):
    s = suggest_small_shapes(CHAINED_TASK)
    assert s is not None and s.exact and s.reached
    assert s.full_elements == 2 * 1024 * 1024 + 3 * 5 * 7 * 11
    assert set(s.small_shapes) == {"height", "width"}  # the big ones; the small ones are not worth it
    assert s.small_shapes["height"] == s.small_shapes["width"] == 128  # halved in turn, largest first
    module = load(tmp_path, CHAINED_TASK, "sugg")
    assert input_elements(module, s.small_shapes) == s.small_elements <= SMALL_INPUT_ELEMENTS
    assert "scale" not in s.small_shapes and "label" not in s.small_shapes


def test_the_suggestion_keeps_constants_at_least_1_and_works_without_powers_of_two():
    source = SCALE_TASK.replace("n_rows = 4", "n_rows = 3").replace("n_cols = 32", "n_cols = 3_000_000")
    s = suggest_small_shapes(source)
    assert s is not None and s.small_shapes == {"n_cols": 3_000_000 >> 8} and s.small_elements <= 65536
    assert s.small_elements == 3 * 11718 and 3 * 23437 > 65536  # halved just far enough; 11718 is fine as is
    tiny = suggest_small_shapes(source, target=1)
    assert tiny is not None and tiny.small_shapes == {"n_rows": 1, "n_cols": 1}


@pytest.mark.parametrize("task", builtin_tasks(), ids=[t.name for t in builtin_tasks()])
def test_the_suggested_sizes_are_what_the_task_really_makes(task, tmp_path: Path):
    s = suggest_small_shapes(task.source)
    assert s is not None and s.exact and s.reached and s.small_shapes
    module = load(tmp_path, task.source, "builtin")
    assert input_elements(module, meta=True) == s.full_elements
    assert input_elements(module, s.small_shapes) == s.small_elements
    assert all(v >= 1 for v in s.small_shapes.values())


def test_shapes_the_source_cannot_be_read_for_are_matched_to_constants_by_value(tmp_path: Path):
    source = SCALE_TASK.replace(
        "return [torch.randn(n_rows, n_cols)]", "return [torch.randn(n_rows, n_cols) for _ in range(2)]"
    ).replace("n_rows = 4", "n_rows = 1024").replace("n_cols = 32", "n_cols = 2048")
    assert suggest_small_shapes(source) is not None and not suggest_small_shapes(source).exact  # a rough guess
    s = suggest_small_shapes(source, [[1024, 2048], [1024, 2048]])  # from the probe's shapes
    assert s is not None and s.exact and s.full_elements == 2 * 1024 * 2048
    module = load(tmp_path, source, "match")
    assert input_elements(module, s.small_shapes) == s.small_elements <= SMALL_INPUT_ELEMENTS


def test_the_suggestion_never_runs_the_source():
    source = "raise SystemExit('executed!')\n" + LARGE_TASK
    warning = large_input_warning(source, [[1024, 2048]])
    assert warning and suggested(warning) == {"n_rows": 256, "n_cols": 256}
    assert large_input_warning(source, [[1000, 1000]]) is None  # 1e6 is not over the line
    no_knobs = SCALE_TASK.replace("torch.randn(n_rows, n_cols)", "torch.randn(2048, 1024)")
    assert "top-level integer constants" in large_input_warning(no_knobs, [[2048, 1024]])
    assert probe_failure_advice(source, "get_inputs() raised ValueError") is None


def test_absurd_sources_still_get_an_answer_quickly():
    timeout = "the reference did not finish within the time limit"
    huge = SCALE_TASK.replace("n_rows = 4", "n_rows = " + "9" * 4000)
    started = time.monotonic()
    assert "small_shapes=" in probe_failure_advice(huge, timeout)
    deep = SCALE_TASK.replace("torch.randn(n_rows, n_cols)", "torch.randn(n_rows, " + "1 + " * 3000 + "n_cols)")
    assert probe_failure_advice(deep, timeout)
    assert time.monotonic() - started < 10
    cpu_alloc = ("the reference's get_inputs()/forward raised RuntimeError: [enforce fail at alloc_cpu.cpp:127] "
                 "DefaultCPUAllocator: can't allocate memory: you tried to allocate 6442450944 bytes")
    assert "small_shapes=" in probe_failure_advice(LARGE_TASK, cpu_alloc)  # KernelBench level 1 on a laptop
    already_small = SCALE_TASK  # 128 input elements: a timeout is not about their size
    assert "look small already" in probe_failure_advice(already_small, timeout)


# -- create_task through the app (CPU interpreter judge) -----------------------------------------

@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory, shared_judge):
    app = App(Settings(home=tmp_path_factory.mktemp("home"), device="cpu"), judge=shared_judge)  # tests/conftest.py
    assert app.judge.backend == "cpu-interpreter"
    yield app
    app.store.close()  # the judge is the session's


@pytest.fixture
def probes(app: App, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, int]]:
    seen: list[dict[str, int]] = []
    real = app.judge.probe_task
    monkeypatch.setattr(app.judge, "probe_task",
                        lambda spec, **kw: seen.append(dict(spec.small_shapes)) or real(spec, **kw))
    return seen


def tool(app: App, tool_name: str, **args: Any) -> dict[str, Any]:
    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=300) as client:
            result = await client.call_tool(tool_name, args)
            assert not result.is_error, result.content[0].text
            return result.structured_content

    return anyio.run(main)


# slow: four real probes, 30 s on two busy cores
@pytest.mark.slow
def test_same_name_other_small_shapes_or_source_is_a_task_of_its_own(app: App, probes):
    first = tool(app, "create_task", name="twin", reference_source=SCALE_TASK)
    assert first["created"] is True and not any("twin" in w for w in first["warnings"])
    again = tool(app, "create_task", name="twin", reference_source=SCALE_TASK)
    assert again["task_id"] == first["task_id"] and again["created"] is False

    small = tool(app, "create_task", name="twin", reference_source=SCALE_TASK, small_shapes={"n_rows": 2})
    assert small["created"] is True and small["task_id"] not in (first["task_id"], "twin")
    assert small["task_id"].startswith("twin-")
    note = next(w for w in small["warnings"] if "already exists" in w)
    assert "'twin'" in note and "other small_shapes" in note and repr(small["task_id"]) in note
    assert first["task_id"] in note

    small_again = tool(app, "create_task", name="twin", reference_source=SCALE_TASK, small_shapes={"n_rows": 2})
    assert small_again["task_id"] == small["task_id"] and small_again["created"] is False
    other_small = tool(app, "create_task", name="twin", reference_source=SCALE_TASK, small_shapes={"n_rows": 1})
    assert other_small["task_id"] not in (first["task_id"], small["task_id"]) and other_small["created"] is True

    changed = SCALE_TASK + "\n# changed\n"
    other_source = tool(app, "create_task", name="twin", reference_source=changed)
    assert other_source["created"] is True
    assert other_source["task_id"] not in (first["task_id"], small["task_id"], other_small["task_id"])
    assert any("another source" in w and repr(other_source["task_id"]) in w for w in other_source["warnings"])
    assert probes == [{}, {"n_rows": 2}, {"n_rows": 1}, {}]  # the repeats did not run again

    listed = {t["task_id"]: t for t in tool(app, "list_tasks", origin="user")["tasks"] if t["name"] == "twin"}
    assert set(listed) == {first["task_id"], small["task_id"], other_small["task_id"], other_source["task_id"]}
    assert listed[first["task_id"]]["small_shapes"] == {} and not listed[first["task_id"]]["has_small_shapes"]
    assert listed[small["task_id"]]["small_shapes"] == {"n_rows": 2} and listed[small["task_id"]]["has_small_shapes"]
    assert listed[first["task_id"]]["source_hash"] == listed[small["task_id"]]["source_hash"]
    assert listed[first["task_id"]]["source_hash"] != listed[other_source["task_id"]]["source_hash"]
    assert app.tasks.spec(small["task_id"]).small_shapes == {"n_rows": 2}
    assert app.tasks.spec(first["task_id"]).small_shapes == {}


def test_an_id_taken_by_an_older_row_of_another_identity_is_not_reused(app: App, probes):
    # Before small_shapes counted, a task with small_shapes got the plain name-sourcehash id.
    legacy_id = app.tasks.id_for("legacy", SCALE_TASK)
    app.tasks.register("legacy", SCALE_TASK, TaskProbe(ok=True), small_shapes={"n_rows": 2}, task_id=legacy_id)
    plain, created = app.create_task("legacy", SCALE_TASK)
    assert created and plain.task_id != legacy_id and plain.small_shapes == {}
    same, created = app.create_task("legacy", SCALE_TASK, {"n_rows": 2})
    assert not created and same.task_id == legacy_id and probes == [{}]


def test_builtin_ids_keep_working_and_their_names_are_not_taken_over(app: App, probes):
    layernorm = builtin_task("layernorm")
    assert app.tasks.spec("layernorm").small_shapes == layernorm.small_shapes
    assert app.tasks.info("layernorm").origin == "builtin"
    info, created = app.create_task("layernorm", layernorm.source, layernorm.small_shapes)
    assert info.task_id == "layernorm" and not created and probes == []
    mine, created = app.create_task("layernorm", SCALE_TASK)
    assert created and mine.task_id.startswith("layernorm-") and mine.origin == "user"
    assert any("built-in task named 'layernorm'" in w and repr(mine.task_id) in w for w in mine.warnings)
    assert app.tasks.spec("layernorm").source == layernorm.source  # the built-in is untouched


def test_large_inputs_on_the_cpu_get_a_warning_with_small_shapes_to_paste(app: App, probes):
    created = tool(app, "create_task", name="large", reference_source=LARGE_TASK)
    assert created["created"] is True and created["backend"] == "cpu-interpreter"
    warning = next(w for w in created["warnings"] if "small_shapes=" in w)
    assert "2,097,152" in warning and "minutes" in warning and "time out" in warning
    assert "powers of two" in warning
    shapes = suggested(warning)
    assert shapes == {"n_rows": 256, "n_cols": 256}
    assert all(v >= 1 for v in shapes.values()) and shapes["n_rows"] * shapes["n_cols"] <= 65536

    again = tool(app, "create_task", name="large", reference_source=LARGE_TASK)  # repeated: warned again
    assert again["created"] is False and any("small_shapes=" in w for w in again["warnings"])
    stored = app.tasks.info(created["task_id"])
    assert not any("small_shapes=" in w for w in stored.warnings)  # a result-time warning, not stored

    pasted = tool(app, "create_task", name="large", reference_source=LARGE_TASK, small_shapes=shapes)
    assert pasted["created"] is True and pasted["task_id"] != created["task_id"]
    assert not any("minutes" in w for w in pasted["warnings"])
    assert pasted["inputs"] == [{"shape": [1024, 2048], "dtype": "float32"}]  # full size, from the meta device
    assert probes == [{}, shapes]


def test_small_inputs_and_the_gpu_get_no_size_warning(app: App, monkeypatch: pytest.MonkeyPatch):
    small, _ = app.create_task("smallish", SCALE_TASK)
    assert not any("small_shapes=" in w for w in small.warnings)
    monkeypatch.setattr(type(app.judge), "backend", property(lambda self: "cuda"))
    large, created = app.create_task("large-on-gpu", LARGE_TASK)
    assert created and not any("small_shapes=" in w for w in large.warnings)


def test_chained_constants_go_through_create_task(app: App, probes):
    info, created = app.create_task("chained", CHAINED_TASK)
    shapes = suggested(next(w for w in info.warnings if "small_shapes=" in w))
    assert shapes == {"height": 128, "width": 128}
    small, created = app.create_task("chained", CHAINED_TASK, shapes)
    assert created and small.small_shapes == shapes
    assert [s.shape for s in small.inputs] == [[2, 1024, 1024], [3, 5, 7, 11]]
    assert probes == [{}, shapes]


@pytest.mark.parametrize("failure", [
    "the reference did not finish within the time limit; reduce the problem size (or give small_shapes for "
    "the CPU interpreter)",
    "loading the reference did not finish within the time limit",
    "running the reference: the process was killed by SIGKILL",
    "the reference's forward raised OutOfMemoryError: CUDA out of memory",
])
def test_a_failing_probe_on_the_cpu_suggests_small_shapes_from_the_constants(
        app: App, monkeypatch: pytest.MonkeyPatch, failure: str):
    monkeypatch.setattr(app.judge, "probe_task", lambda spec, **kw: TaskProbe(ok=False, error=failure))
    with pytest.raises(TaskFormatError) as info:
        app.create_task("slow", LARGE_TASK)
    assert failure in str(info.value) and suggested(str(info.value)) == {"n_rows": 256, "n_cols": 256}
    with pytest.raises(TaskFormatError) as info:  # with small_shapes given, no new suggestion
        app.create_task("slow", LARGE_TASK, {"n_rows": 2})
    assert "small_shapes=" not in str(info.value)


def test_a_bug_in_the_reference_gets_no_size_advice(app: App, monkeypatch: pytest.MonkeyPatch):
    failure = "the reference's forward raised TypeError: unsupported operand"
    monkeypatch.setattr(app.judge, "probe_task", lambda spec, **kw: TaskProbe(ok=False, error=failure))
    with pytest.raises(TaskFormatError) as info:
        app.create_task("buggy", LARGE_TASK)
    assert "small_shapes=" not in str(info.value)


# slow: a real 2 s probe timeout (40 s on two busy cores, and over its own 30 s bound under load); the suggestion
# itself: test_a_failing_probe_on_the_cpu_suggests_small_shapes_from_the_constants
@pytest.mark.slow
def test_a_real_probe_timeout_suggests_small_shapes(tmp_path: Path):
    slow = LARGE_TASK.replace("return x * self.scale + 1.0", "import time; time.sleep(60); return x")
    app = App(Settings(home=tmp_path, device="cpu", limits=JudgeLimits(timeout_s_cpu=2.0)))
    try:
        started = time.monotonic()
        with pytest.raises(TaskFormatError) as info:
            app.create_task("sleepy", slow)
        assert time.monotonic() - started < 30
    finally:
        app.close()
    message = str(info.value)
    assert "did not finish within the time limit" in message
    assert suggested(message) == {"n_rows": 256, "n_cols": 256}


@pytest.mark.parametrize("name, said", [
    ("affine\nimport os; os.system('echo pwned')\n#", "one line of printable characters"),
    ("n" * 2_000_000, "the limit is"),
    ("\u202eevil", "printable"),
])
def test_a_task_name_is_one_short_printable_line(name: str, said: str) -> None:
    """Found by a red team: a newline in a name wrote code into an exported kernel's header, and a 2 MB name
    made every later list_tasks answer 2 MB."""
    from adaexplore_mcp.tasks.format import TaskFormatError, check_task_name

    with pytest.raises(TaskFormatError, match=said):
        check_task_name(name)
    check_task_name("fused gelu (v2)")


def test_an_exported_header_comments_every_line_of_a_stored_name() -> None:
    from adaexplore_mcp.export.kernel_file import KernelMeta, _header

    header = _header(KernelMeta(task="affine\nimport os; os.system('x')\n#"))
    assert all(line.startswith("#") for line in header.splitlines()), header


def test_create_task_over_mcp_takes_a_tuple_constant_as_a_list(app: App):
    source = textwrap.dedent('''
        import torch
        import torch.nn as nn

        batch_size = 64
        channels = 32
        bias_shape = (channels, 1)


        class Model(nn.Module):
            def __init__(self, bias_shape):
                super().__init__()
                self.bias = nn.Parameter(torch.randn(bias_shape))

            def forward(self, x):
                return x + self.bias


        def get_inputs():
            return [torch.randn(batch_size, channels, 8)]


        def get_init_inputs():
            return [bias_shape]
        ''')
    made = tool(app, "create_task", name="tuple-bias", reference_source=source,
                small_shapes={"batch_size": 2, "channels": 4, "bias_shape": [4, 1]})
    assert made["small_shapes"] == {"batch_size": 2, "channels": 4, "bias_shape": [4, 1]}
    assert app.tasks.info(made["task_id"]).small_shapes["bias_shape"] == [4, 1]
