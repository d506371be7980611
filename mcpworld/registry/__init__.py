"""The registry: server.json records in a SQLModel store, the /v0 REST API, its own MCP server,
health checks, client-config export, and `connect()` — the one way consumers reach any server."""
