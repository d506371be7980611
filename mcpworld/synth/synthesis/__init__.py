"""Worlds written by a model: the AWM pipeline from a scenario to a validated world package (`pipeline`, with its
prompts in `prompts`), scenario expansion from seed domains (`scenarios`), and twins of real MCP servers
(`twin`, imported as an AWM scenario). Every stage's code runs in a contained worker, never here.
"""
