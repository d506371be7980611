"""Published environments served as mcpworld worlds: AWM's AgentWorldModel-1K scenarios (`awm`, read by
`awm_format`, their generated server and verifiers run by `awm_worker` inside a worker) and Agent-World
environments (`agent_world`), each written as a thin world package and installed and registered by `install`.
"""
