"""The MCP vocabulary, one module per part: each `register(mcp, get_app)` adds its tools/resources.

Nothing here decides anything: a tool validates nothing the app does not, calls one app method and
returns its pydantic result. `common` holds the two helpers every module needs.
"""
