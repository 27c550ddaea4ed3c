"""The shipped client configs parse and point at this server the way each client expects."""

from __future__ import annotations

import json
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(relative: str) -> dict:
    return json.loads((EXAMPLES / relative).read_text())


def test_stdio_configs_start_the_console_script_with_a_data_directory():
    for relative, key in [("claude_desktop_config.json", "mcpServers"), ("cursor/.cursor/mcp.json", "mcpServers"),
                          ("vscode/.vscode/mcp.json", "servers")]:
        (server,) = _load(relative)[key].values()
        assert server["command"] == "adaexplore-mcp", relative
        assert "ADAEXPLORE_HOME" in server["env"], relative
    assert _load("vscode/.vscode/mcp.json")["servers"]["adaexplore"]["type"] == "stdio"


def test_http_configs_send_the_bearer_token_to_the_mcp_path():
    vscode = _load("vscode-http/.vscode/mcp.json")
    server = vscode["servers"]["adaexplore-gpu"]
    assert server["type"] == "http" and server["url"].endswith("/mcp")
    assert server["headers"]["Authorization"] == "Bearer ${input:adaexplore-token}"
    assert vscode["inputs"][0]["id"] == "adaexplore-token" and vscode["inputs"][0]["password"] is True

    cursor = _load("cursor-http/.cursor/mcp.json")["mcpServers"]["adaexplore-gpu"]
    assert cursor["url"].endswith("/mcp") and "${env:ADAEXPLORE_TOKEN}" in cursor["headers"]["Authorization"]

    code = _load("claude-code-http/.mcp.json")["mcpServers"]["adaexplore-gpu"]
    assert code["type"] == "http" and code["headers"]["Authorization"] == "Bearer ${ADAEXPLORE_TOKEN}"

    desktop = _load("claude_desktop_config.http.json")["mcpServers"]["adaexplore-gpu"]
    args = desktop["args"]
    assert any(a.startswith("mcp-remote@") for a in args) and any(a.endswith("/mcp") for a in args)
    assert args[args.index("--header") + 1] == "Authorization:${AUTH_HEADER}"
    assert desktop["env"]["AUTH_HEADER"].startswith("Bearer ")


def test_the_claude_code_page_has_the_add_commands():
    text = (EXAMPLES / "claude_code.md").read_text()
    assert "claude mcp add adaexplore -- adaexplore-mcp" in text
    assert "-e ADAEXPLORE_HOME=" in text
    assert "claude mcp add --transport http adaexplore-gpu" in text
