"""MCP servers that mcpworld ships: worlds (envs), and later the SWE sandbox and world models."""
