"""Worlds shipped with mcpworld. Each subdirectory is a world package."""
