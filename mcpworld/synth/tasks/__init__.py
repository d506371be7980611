"""Synthesized tasks: tool-graph chains (`toolgraph`, `walks`, `questions`, `graph`) and programmatic computations
(`programmatic`) over any world, built from real tool results (`results`, `names`), and kept as data that the
runtime alone judges (`taskspec`: typed answers and refusal reasons, audited before any task is kept).
"""
