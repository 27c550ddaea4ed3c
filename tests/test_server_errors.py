"""No opaque errors: through the in-process MCP client, every failure of a tool is a tool error that says
what happened. A caller's mistake keeps its own text; a bug names its type, its message and where it
happened; hostile input (lone surrogates, huge ids, integers beyond 64 bits) gets a readable answer; the
optimize_module prompt rejects bad arguments with a validation message."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from adaexplore_mcp import errors as E
from adaexplore_mcp.app import App
from adaexplore_mcp.config import Settings
from adaexplore_mcp.search import service as search_service
from adaexplore_mcp.search.fake_judge import FakeJudge
from adaexplore_mcp.server import build_server

KERNEL = "import triton\nclass ModelNew:\n    pass\n# fake: verdict=passed speedup=1.5\n"
OPAQUE = re.compile(r"^Error executing tool \w+$")
LOCATION = re.compile(r"internal error in adaexplore_mcp/[\w/]+\.py:[^ ]+ \(line \d+\): ")


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    # FakeJudge: verdicts from `# fake:` comments, no workers (the MCP surface on its own)
    app = App(Settings(home=tmp_path_factory.mktemp("home"), device="cpu"), judge=FakeJudge())
    yield app
    app.close()


def run(app: App, scenario) -> Any:
    async def main():
        async with Client(build_server(app=app), read_timeout_seconds=60) as client:
            return await scenario(client)

    return anyio.run(main)


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def error_text(client: Client, tool: str, **args: Any) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert not OPAQUE.match(text), text
    text.encode("utf-8")  # sendable: no lone surrogates
    return text


def tool_error(app: App, tool: str, **args: Any) -> str:
    async def scenario(client: Client) -> str:
        return await error_text(client, tool, **args)

    return run(app, scenario)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def _raise(exc: BaseException):
    def boom(*args: Any, **kwargs: Any):
        raise exc

    return boom


# -- unexpected exceptions ------------------------------------------------------------------------

def test_an_unexpected_exception_is_a_tool_error_with_its_type_message_and_place(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.search, "next_step", _raise(KeyError("x")))
    text = tool_error(app, "next_step", search_id="srch_any")
    assert "internal error in adaexplore_mcp/surface/search_tools.py:next_step (line " in text
    assert text.endswith("KeyError: 'x'")
    assert LOCATION.search(text)


def test_the_place_is_the_innermost_frame_in_the_package(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_service, "plan_step", _raise(IndexError("list index out of range")))
    sid = run(app, lambda c: call(c, "start_search", task_id="scaled_softmax", budget=2))["search_id"]
    text = tool_error(app, "next_step", search_id=sid)
    assert "adaexplore_mcp/search/service.py:_new_step (line " in text
    assert "IndexError: list index out of range" in text


@pytest.mark.parametrize("tool, target, args", [
    ("list_tasks", ("tasks", "list"), {}),
    ("failure_clusters", ("memory", "failure_clusters"), {}),
    ("list_searches", ("search", "list_searches"), {}),
    ("get_job", ("jobs", "get"), {"job_id": "job_x"}),
    ("get_search", ("search", "get_search"), {"search_id": "srch_x"}),
])
def test_every_part_of_the_surface_is_guarded(app: App, monkeypatch: pytest.MonkeyPatch, tool: str,
                                              target: tuple[str, str], args: dict[str, Any]) -> None:
    monkeypatch.setattr(getattr(app, target[0]), target[1], _raise(KeyError("lost key")))
    text = tool_error(app, tool, **args)
    assert LOCATION.search(text) and "KeyError: 'lost key'" in text


def test_a_crash_in_a_blocking_tool_run_in_a_thread_is_readable(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.search, "expand_node", _raise(ZeroDivisionError("division by zero")))
    text = tool_error(app, "expand_node", search_id="srch_x", step_id="step_x", kernel_source=KERNEL)
    assert LOCATION.search(text) and "ZeroDivisionError: division by zero" in text


def test_a_bug_in_a_background_job_is_reported_with_its_type_and_place(
        app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario(client: Client) -> dict[str, Any]:
        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=2))["search_id"]
        step = (await call(client, "next_step", search_id=sid))["step_id"]
        monkeypatch.setattr(app.search, "expand_node", _raise(KeyError("parent")))
        job = await call(client, "submit_expand", search_id=sid, step_id=step, kernel_source=KERNEL)
        deadline = time.monotonic() + 30
        while job["status"] in ("queued", "running") and time.monotonic() < deadline:
            await anyio.sleep(0.05)
            job = await call(client, "get_job", job_id=job["job_id"])
        return job

    job = run(app, scenario)
    assert job["status"] == "failed"
    assert LOCATION.search(job["error"]) and "KeyError: 'parent'" in job["error"]


def test_our_own_model_rejecting_our_own_data_is_an_internal_error(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import BaseModel

    class Strict(BaseModel):
        n: int

    monkeypatch.setattr(app.tasks, "list", lambda *a, **k: Strict(n="not a number"))
    text = tool_error(app, "list_tasks")
    assert LOCATION.search(text) and "ValidationError" in text


def test_a_result_that_fails_output_conversion_is_readable(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.search, "get_search", lambda *a, **k: "not a tree")
    text = tool_error(app, "get_search", search_id="srch_x")
    assert "internal error in" in text and "Error executing tool get_search: " in text


# -- messages that survive anything ----------------------------------------------------------------

def test_an_exception_whose_str_raises_is_still_readable(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.search, "next_step", _raise(Unprintable()))
    text = tool_error(app, "next_step", search_id="srch_any")
    assert LOCATION.search(text) and "Unprintable: <unprintable Unprintable>" in text


def test_a_user_error_whose_str_raises_is_still_readable(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    class BadUserError(E.UserError):
        def __str__(self) -> str:
            raise RuntimeError("no")

    monkeypatch.setattr(app.search, "next_step", _raise(BadUserError(1, 2)))
    assert "<unprintable BadUserError>" in tool_error(app, "next_step", search_id="srch_any")


def test_a_lone_surrogate_in_an_exception_message_is_escaped(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app.search, "next_step", _raise(RuntimeError("bad \ud800 text")))
    text = tool_error(app, "next_step", search_id="srch_any")
    assert "RuntimeError: bad \\ud800 text" in text


@pytest.mark.parametrize("tool, args, name", [
    ("next_step", {"search_id": "srch_\ud800"}, "search_id"),
    ("create_task", {"name": "\udfff", "reference_source": "x = 1"}, "name"),
    ("evaluate_kernel", {"task_id": "scaled_softmax", "kernel_source": "# \ud83d\n"}, "kernel_source"),
    ("query_skills", {"text": "tl.dot \ud800"}, "text"),
    ("expand_node", {"search_id": "s", "step_id": "t", "edits": [{"old": "a", "new": "\ud800"}]}, "edits[0].new"),
])
def test_lone_surrogates_in_arguments_are_readable_errors(app: App, tool: str, args: dict, name: str) -> None:
    text = tool_error(app, tool, **args)
    assert f"{name} contains a lone surrogate" in text and "internal error" not in text


def test_unknown_ids_are_readable_errors(app: App) -> None:
    async def scenario(client: Client) -> None:
        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=2))["search_id"]
        assert "unknown search_id 'srch_nope'" in await error_text(client, "next_step", search_id="srch_nope")
        assert "unknown search_id" in await error_text(client, "get_search", search_id="srch_nope")
        assert "unknown search_id" in await error_text(client, "best_kernel", search_id="srch_nope")
        assert "unknown search_id" in await error_text(client, "submit_expand", search_id="srch_nope",
                                                       step_id="step_nope", kernel_source=KERNEL)
        assert "unknown step_id" in await error_text(client, "expand_node", search_id=sid, step_id="step_nope",
                                                     kernel_source=KERNEL)
        assert "unknown job_id" in await error_text(client, "get_job", job_id="job_nope")
        assert "unknown task_id" in await error_text(client, "evaluate_kernel", task_id="nope", kernel_source=KERNEL)
        assert "unknown task_id" in await error_text(client, "start_search", task_id="nope", budget=2)
        assert "unknown rule id" in await error_text(client, "retire_rule", rule_id="rule_nope", reason="r")
        assert "unknown cluster id" in await error_text(client, "add_rule", cluster_id="cl_nope",
                                                        text="You cannot do that.")
        for text in [await error_text(client, "next_step", search_id="srch_nope")]:
            assert "internal error" not in text

    run(app, scenario)


@pytest.mark.parametrize("tool, args", [
    ("get_job", {"job_id": "j" * 100_000}),
    ("next_step", {"search_id": "s" * 100_000}),
    ("get_search", {"search_id": "s" * 5_000}),
    ("evaluate_kernel", {"task_id": "t" * 100_000, "kernel_source": KERNEL}),
    ("retire_rule", {"rule_id": "r" * 100_000, "reason": "why"}),
    ("start_search", {"task_id": "scaled_softmax", "budget": 2, "strategy": "z" * 100_000}),
])
def test_a_message_quotes_at_most_300_characters_of_an_input(app: App, tool: str, args: dict) -> None:
    text = tool_error(app, tool, **args)
    run_length = max((len(m.group(0)) for m in re.finditer(r"(\w)\1{50,}", text)), default=0)
    assert 250 <= run_length <= E.QUOTE_CHARS, (run_length, text[:200])
    assert "..." in text and len(text) < 1200, text[:200]


# -- integers SQLite cannot store ------------------------------------------------------------------

@pytest.mark.parametrize("tool, args, name", [
    ("start_search", {"task_id": "scaled_softmax", "budget": 2, "seed": 2**70}, "seed"),
    ("start_search", {"task_id": "scaled_softmax", "budget": 2, "seed": -(2**70)}, "seed"),
    ("start_search", {"task_id": "scaled_softmax", "budget": 2**64}, "budget"),
    ("start_search", {"task_id": "scaled_softmax", "budget": 2, "seed": 2**63}, "seed"),
    ("query_skills", {"limit": 2**64}, "limit"),
    ("synthesize_tasks", {"count": 2**70}, "count"),
    ("submit_synthesis", {"count": 1, "seed": -(2**100)}, "seed"),
    ("create_task", {"name": "n", "reference_source": "x = 1", "small_shapes": {"batch_size": 2**64}},
     "small_shapes['batch_size']"),
])
def test_integers_beyond_64_bits_are_readable_errors(app: App, tool: str, args: dict, name: str) -> None:
    text = tool_error(app, tool, **args)
    assert f"{name} is" in text and "64-bit" in text and "Overflow" not in text


def test_a_huge_integer_is_described_not_printed(app: App) -> None:
    text = tool_error(app, "start_search", task_id="scaled_softmax", budget=2, seed=10**5000)
    assert "an integer of 16610 bits" in text and len(text) < 500


def test_seeds_across_the_whole_64_bit_range_are_accepted_and_stored_as_given(app: App) -> None:
    async def scenario(client: Client) -> None:
        for seed in (-(2**63), -7, 0, 2**63 - 1):
            started = await call(client, "start_search", task_id="scaled_softmax", budget=1, seed=seed)
            assert started["seed"] == seed
            tree = await call(client, "get_search", search_id=started["search_id"])
            assert tree["seed"] == seed
            brief = await call(client, "next_step", search_id=started["search_id"])
            assert brief["kind"] == "large"

    run(app, scenario)


def test_bad_budgets_are_readable_errors(app: App) -> None:
    for budget in (0, -5, 10**6):
        assert "budget must be" in tool_error(app, "start_search", task_id="scaled_softmax", budget=budget)


def test_arguments_of_the_wrong_type_name_the_argument_what_was_expected_and_an_example(app: App) -> None:
    text = tool_error(app, "start_search", task_id="scaled_softmax", budget="lots")
    assert text == "invalid arguments: budget: expected a whole number, got 'lots' (text); e.g. budget=20"
    edits = tool_error(app, "expand_node", search_id="srch_x", step_id="step_x", edits="BLOCK=64")
    assert 'edits: expected a list of objects with "old", "new"' in edits and 'e.g. edits=[{"old": ' in edits
    missing = tool_error(app, "expand_node", search_id="srch_x", step_id="step_x", edits=[{"old": "a"}])
    assert missing.startswith("invalid arguments: edits[0].new is required")
    shapes = tool_error(app, "create_task", name="t", reference_source="x", small_shapes={"batch_size": "eight"})
    assert "small_shapes.batch_size: expected a whole number or a list, got 'eight'" in shapes  # ints, or tuples as lists
    for text in (text, edits, missing, shapes):
        assert "pydantic" not in text and "validation error" not in text and "internal error" not in text


# -- resources --------------------------------------------------------------------------------------

def test_resources_answer_readable_errors(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    async def read(client: Client, uri: str) -> MCPError:
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri)
        return info.value

    async def scenario(client: Client) -> None:
        sid = (await call(client, "start_search", task_id="scaled_softmax", budget=2))["search_id"]
        missing = await read(client, f"adaexplore://searches/{sid}/nodes/{'9' * 40}/kernel")
        assert missing.error.code == INVALID_PARAMS and "no node" in missing.error.message
        word = await read(client, f"adaexplore://searches/{sid}/nodes/abc/kernel")
        assert "whole number" in word.error.message
        unknown = await read(client, "adaexplore://searches/srch_nope/tree")
        assert "unknown search_id" in unknown.error.message
        monkeypatch.setattr(app.search, "get_search", _raise(KeyError("boom")))
        crash = await read(client, f"adaexplore://searches/{sid}/tree")
        assert LOCATION.search(crash.error.message) and "KeyError: 'boom'" in crash.error.message

    run(app, scenario)


@pytest.mark.parametrize("uri", ["adaexplore://tasks/{id}/reference", "adaexplore://searches/{id}/tree",
                                 "adaexplore://evaluations/{id}"])
def test_a_resource_error_quotes_at_most_300_characters_of_an_id(app: App, uri: str) -> None:
    """As a tool's error does: a 5000-character id is not echoed whole (it once was for a task's reference)."""
    async def scenario(client: Client) -> str:
        with pytest.raises(MCPError) as info:
            await client.read_resource(uri.format(id="t" * 5000))
        return info.value.error.message

    text = run(app, scenario)
    run_length = max((len(m.group(0)) for m in re.finditer(r"(\w)\1{50,}", text)), default=0)
    assert 250 <= run_length <= E.QUOTE_CHARS, (run_length, text[:200])
    assert "..." in text and "unknown" in text and "internal error" not in text, text[:300]


# -- the prompt ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("arguments, expected", [
    ({"budget": "lots"}, "budget must be a whole number"),
    ({"budget": "-3"}, "budget must be a whole number"),
    ({"budget": "0"}, "from 1 to 10000"),  # search.types.MAX_BUDGET, the limit start_search checks
    ({"budget": "2.5"}, "budget must be a whole number"),
    ({"budget": "9" * 5000}, "budget must be a whole number"),
    ({"module_source": "x = 1\n" * 50_000}, "module_source is 300000 bytes; the limit is"),
    ({"module_source": "class Model: \ud800"}, "module_source contains a lone surrogate"),
])
def test_bad_prompt_arguments_are_validation_messages(app: App, arguments: dict, expected: str) -> None:
    async def scenario(client: Client) -> MCPError:
        with pytest.raises(MCPError) as info:
            await client.get_prompt("optimize_module", arguments)
        return info.value

    error = run(app, scenario)
    assert error.error.code == INVALID_PARAMS
    assert expected in error.error.message and "Internal server error" not in error.error.message
    assert len(error.error.message) < 700


def test_good_prompt_arguments_still_render(app: App) -> None:
    async def scenario(client: Client) -> str:
        prompt = await client.get_prompt("optimize_module", {"budget": " 12 ", "module_source": "class Model: pass"})
        return prompt.messages[0].content.text

    text = run(app, scenario)
    assert "budget=12)" in text and "class Model: pass" in text


# -- the helpers --------------------------------------------------------------------------------------

def test_arguments_are_checked_deep_inside_lists_dicts_and_models() -> None:
    from adaexplore_mcp.search import Edit
    from adaexplore_mcp.surface.common import check_arguments

    check_arguments({"seed": 2**63 - 1, "flag": True, "text": "ok \u00e9", "none": None})
    with pytest.raises(E.UserError, match=r"small_shapes key contains a lone surrogate \(U\+D800\)"):
        check_arguments({"small_shapes": {"\ud800": 1}})
    with pytest.raises(E.UserError, match=r"small_shapes\['n'\] is .* 64-bit"):
        check_arguments({"small_shapes": {"n": -(2**63) - 1}})
    with pytest.raises(E.UserError, match=r"edits\[1\]\.old contains a lone surrogate"):
        check_arguments({"edits": [Edit(old="a", new="b"), Edit(old="\udc00", new="b")]})


def test_the_message_helpers_never_raise_and_never_leak_surrogates() -> None:
    assert E.safe_str(Unprintable()) == "<unprintable Unprintable>"
    assert E.safe_str("a\ud800b") == "a\\ud800b"
    assert E.quote("x" * 1000).startswith("'" + "x" * 300 + "'...")
    assert E.quote("\ud800") == "'\\ud800'"
    assert E.quote(10**5000) == "<an integer of 16610 bits>"
    assert E.clip("abc", 2) == "ab..."
    try:
        {}["missing"]
    except KeyError as exc:
        assert re.fullmatch(r"internal error in tests/test_server_errors\.py:test_the_message_helpers_never_raise"
                            r"_and_never_leak_surrogates \(line \d+\): KeyError: 'missing'",
                            E.internal_error_message(exc))
    assert not E.is_user_error(KeyError("k")) and E.is_user_error(ValueError("v"))
    assert E.is_user_error(E.NotFound("n")) and not E.is_user_error(UnicodeEncodeError("utf-8", "", 0, 1, "x"))


# -- red team, round five: bounded inputs and errors, and no session takes every thread ------------------------

TASK = ("import torch\nimport torch.nn as nn\nN = 8\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\n\ndef get_inputs():\n    return [torch.randn(N)]\n\ndef get_init_inputs():\n    return []\n")


def test_a_huge_description_or_many_bad_shape_names_is_a_short_error(app: App) -> None:
    async def scenario(client: Client) -> tuple[str, str]:
        long = await error_text(client, "create_task", name="described", reference_source=TASK,
                                description="x" * 1_000_000)
        names = {f"knob_{i}_" + "y" * 250: 1 for i in range(400)}
        shapes = await error_text(client, "create_task", name="shaped", reference_source=TASK, small_shapes=names)
        return long, shapes

    long, shapes = run(app, scenario)
    assert "the limit is 2000" in long and len(long) < 400, long[:500]
    assert "and 392 more" in shapes and len(shapes) < 1000, shapes[:1200]


def test_an_argument_error_for_every_item_of_a_long_list_is_clipped(app: App) -> None:
    async def scenario(client: Client) -> str:
        result = await client.call_tool("merge_rules", {"rule_ids": [{"bad": i} for i in range(5000)],
                                                        "text": "t", "reason": "r"})
        assert result.is_error
        return result.content[0].text

    text = run(app, scenario)
    assert len(text) < 600 and text.endswith("... and 4995 more") and text.count("e.g. rule_ids=") == 1, text[:300]


def test_one_session_cannot_hold_more_than_its_share_of_blocking_calls() -> None:
    """Blocking calls run in a pool of their own, at most MAX_BLOCKING_PER_CLIENT per session: the next one is a
    tool error at once, and another session (or a quick tool) is not queued behind them."""
    import threading

    from adaexplore_mcp.clients import CURRENT_CLIENT
    from adaexplore_mcp.surface import common

    release = threading.Event()

    def slow(progress) -> str:
        release.wait(20)
        return "done"

    async def main() -> tuple[list, str]:
        results: list = []

        async def one(client: str) -> None:
            CURRENT_CLIENT.set(client)
            try:
                results.append(await common.run_blocking(None, slow))
            except E.UserError as exc:
                results.append(str(exc))

        async with anyio.create_task_group() as tg:
            for _ in range(common.MAX_BLOCKING_PER_CLIENT + 1):
                tg.start_soon(one, "greedy")
            await anyio.sleep(0.5)
            CURRENT_CLIENT.set("other")
            other = await anyio.to_thread.run_sync(lambda: "quick")  # anyio's default pool is still free
            tg.start_soon(one, "other")
            await anyio.sleep(0.2)
            release.set()
        return results, other

    results, other = anyio.run(main)
    refused = [r for r in results if r != "done"]
    assert other == "quick" and len(refused) == 1 and "already has" in refused[0], results
    assert results.count("done") == common.MAX_BLOCKING_PER_CLIENT + 1  # the greedy session's share, and the other's


def test_list_searches_shows_the_newest_and_says_how_many_there_are(app: App) -> None:
    async def scenario(client: Client) -> tuple[dict, str]:
        task = await call(client, "create_task", name="listed", reference_source=TASK)
        for _ in range(4):
            await call(client, "start_search", task_id=task["task_id"], budget=2)
        listed = await call(client, "list_searches", task_id=task["task_id"], limit=3)
        return listed, await error_text(client, "list_searches", limit=0)

    listed, bad = run(app, scenario)
    assert listed["total"] == 4 and len(listed["searches"]) == 3, listed
    assert "between 1 and 500" in bad


def test_a_damaged_data_store_is_named_as_such_not_as_a_bug(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team, round five: a data file overwritten under the server answered "internal error in store.py"."""
    import sqlite3

    def damaged(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(app.tasks, "list", damaged)

    async def scenario(client: Client) -> str:
        return await error_text(client, "list_tasks")

    text = run(app, scenario)
    assert "data store could not be used" in text and "adaexplore.sqlite3" in text and "internal error" not in text


def test_get_search_shows_at_most_max_nodes_with_the_best_path_and_counts_the_rest(app: App) -> None:
    async def scenario(client: Client) -> tuple[dict, dict]:
        task = await call(client, "create_task", name="trimmed", reference_source=TASK)
        search = await call(client, "start_search", task_id=task["task_id"], budget=6)
        for i in range(6):
            step = await call(client, "next_step", search_id=search["search_id"])
            speed = 3.0 if i == 1 else 1.1
            await call(client, "expand_node", search_id=search["search_id"], step_id=step["step_id"],
                       kernel_source=KERNEL.replace("speedup=1.5", f"speedup={speed}") + f"# {i}\n")
        whole = await call(client, "get_search", search_id=search["search_id"])
        cut = await call(client, "get_search", search_id=search["search_id"], max_nodes=4)
        return whole, cut

    whole, cut = run(app, scenario)
    assert len(whole["nodes"]) == 7 and whole["omitted_nodes"] == 0
    ids = [n["node_id"] for n in cut["nodes"]]
    best = whole["best_node_id"]
    assert len(ids) == 4 and cut["omitted_nodes"] == 3 and 0 in ids and best in ids, (ids, best)
    assert max(n["step_index"] for n in whole["nodes"]) in [n["step_index"] for n in cut["nodes"]]  # the newest
