"""World runtime: database-backed application environments served as MCP servers.

A world author imports everything from `mcpworld.worlds.world`; the rest of this package loads,
validates, forks and serves worlds.
"""
