"""The kernel every layer builds on: shared models, the episode protocol, the LLM client, paths, security."""
