"""adaexplore-mcp: an MCP server that judges and searches Triton kernels (AdaExplore)."""

__version__ = "0.1.0"
