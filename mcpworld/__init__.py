"""mcpworld: environments for tool-using agents, each a real MCP server behind one registry."""

__version__ = "0.1.0"
