"""World synthesis: AWM-style worlds from a scenario, tool-graph and programmatic tasks, Agent-World imports, arena.

Generated and imported code never runs in the caller's interpreter: see `worker` for the sandbox.
"""
