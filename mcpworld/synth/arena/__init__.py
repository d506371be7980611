"""The self-evolving arena: each round evaluates a policy on held-out tasks (`rounds`), diagnoses its failures
per world (`diagnosis`), and synthesizes targeted tasks for the weakest worlds as the next round's held-out set.
"""
