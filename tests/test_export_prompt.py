"""The optimize_module prompt teaches the whole loop with this server's tool names, briefly."""

from __future__ import annotations

import anyio
from mcp.server import MCPServer

from adaexplore_mcp.prompts import OPTIMIZE_MODULE_PROMPT, optimize_module
from adaexplore_mcp.search.types import MAX_BUDGET

TOOLS = ["create_task", "start_search", "next_step", "expand_node", "best_kernel", "export_kernel",
         "search_report", "evaluate_kernel"]


def test_the_prompt_names_every_tool_of_the_loop_and_the_contract():
    text = optimize_module()
    for tool in TOOLS:
        assert tool in text, tool
    for phrase in ("get_init_inputs", "small_shapes", "edits", "working_memory", "pool", "rules", "steps_left",
                   "ModelNew", "@triton.jit", 'input_precision="ieee"', "float32", "budget=20"):
        assert phrase in text, phrase


def test_the_prompt_stays_under_700_words_even_with_a_module():
    assert len(optimize_module().split()) < 700
    module = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
    text = optimize_module(module, budget=50)
    assert module.strip() in text and "budget=50" in text
    assert len(text.split()) - len(module.split()) < 700


def test_the_budget_is_clamped_to_a_sane_range():
    assert "budget=1)" in optimize_module(budget=0)
    assert f"budget={MAX_BUDGET})" in optimize_module(budget=10**6)  # the limit start_search checks


def test_the_prompt_registers_on_an_mcp_server_with_its_arguments():
    server = MCPServer("prompt-test")
    server.prompt(name="optimize_module")(OPTIMIZE_MODULE_PROMPT)

    async def main():
        prompts = await server.list_prompts()
        (prompt,) = prompts
        assert prompt.name == "optimize_module"
        assert {a.name for a in prompt.arguments} == {"module_source", "budget"}
        result = await server.get_prompt("optimize_module", {"module_source": "class Model: pass", "budget": "7"})
        text = result.messages[0].content.text
        assert "budget=7" in text and "class Model: pass" in text

    anyio.run(main)
