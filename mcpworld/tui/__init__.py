"""`mcpworld tui`: a Textual terminal UI over the registry, live servers, trajectories and rollouts.

Textual is imported only here and below, so the rest of mcpworld never needs it.
"""
